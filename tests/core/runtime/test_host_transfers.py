"""The device-safety check: no implicit device-to-host transfer anywhere in leap/ (leap.core.runtime.host_transfers)."""

from pathlib import Path

import pytest

import leap
from leap.core.runtime.host_transfers import check_tree, find_implicit_transfers

LEAP_ROOT = Path(leap.__file__).parent


def test_leap_has_no_implicit_transfers():
    findings = check_tree(LEAP_ROOT)
    assert not findings, "implicit device-to-host transfers:\n" + "\n".join(map(str, findings))


# The CUDA crash this check exists for: ear_gain.py once ended with `.sum(dim=1).numpy()` on a tensor
# that stays on the model's device.
PLANTED = {
    "numpy of a device tensor": "def f(alpha):\n    return torch.cumprod(alpha, 1).sum(1).numpy()\n",
    "numpy after detach only": "def f(t):\n    return t.detach().numpy()\n",
    "np.asarray of a torch result": "def f(t):\n    return np.asarray(torch.stack(t))\n",
    "float of a tensor reduction": "def f(t):\n    return float(t.norm())\n",
    "int of argmax": "def f(logits):\n    return int(logits.argmax())\n",
}


@pytest.mark.parametrize("source", PLANTED.values(), ids=PLANTED.keys())
def test_planted_implicit_transfer_is_flagged(source):
    findings = find_implicit_transfers(source)
    assert len(findings) == 1 and findings[0].line == 2


EXPLICIT = {
    "cpu before numpy": "def f(t):\n    return t.sum(1).cpu().numpy()\n",
    "cpu then float then numpy": "def f(t):\n    return t.detach().cpu().float().numpy()\n",
    "to cpu": "def f(t):\n    return t.to('cpu').numpy()\n",
    "to_numpy helper": "def f(t):\n    return np.asarray(to_numpy(t))\n",
    "item": "def f(logits):\n    return int(logits.argmax().item())\n",
    "numpy math": "def f(y):\n    return float(np.max(y))\n",
    "opt-out comment": "def f(t):\n    return t.numpy()  # host: built on the CPU two lines up\n",
}


@pytest.mark.parametrize("source", EXPLICIT.values(), ids=EXPLICIT.keys())
def test_explicit_transfers_pass(source):
    assert find_implicit_transfers(source) == []
