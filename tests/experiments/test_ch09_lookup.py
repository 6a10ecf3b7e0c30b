import pytest
import torch

from llmviz.experiments.ch09_lookup import verbatim_share


def _ids(text: str) -> torch.Tensor:
    return torch.tensor(list(text.encode()))


def test_verbatim_share_counts_strings_found_in_training_text():
    train = _ids("the cat sat on the mat")
    ev = _ids("a cat sat; the dog")
    # index of "t" in "sat" (8), of "d" in "dog" (15) and of "g" (17)
    targets = [8, 15, 17]
    # 2 bytes before + target: "sat" is in training, "e d" and "dog" are not
    assert verbatim_share(train, ev, targets, 2) == pytest.approx(1 / 3)
    # 6 bytes before: "cat sat" is in training too
    assert verbatim_share(train, ev, targets, 6) == pytest.approx(1 / 3)
    # a target with too few bytes before it is not found
    assert verbatim_share(train, ev, [8], 9) == 0.0
    # "a cat sat" is not in the training text
    assert verbatim_share(train, ev, [8], 8) == 0.0


def test_verbatim_share_rejects_bad_input():
    with pytest.raises(ValueError, match="targets is empty"):
        verbatim_share(_ids("abc"), _ids("abc"), [], 1)
    with pytest.raises(ValueError, match="context"):
        verbatim_share(_ids("abc"), _ids("abc"), [2], 0)
