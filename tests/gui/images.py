"""Tolerant picture comparison for the GUI tests: the pictures are drawn by float arithmetic
(anti-aliased rims), so a pixel may differ by a few levels between numpy builds or between
Taichi's C++ and our numpy; a wrong primitive changes hundreds of pixels by much more."""
import numpy as np


def assert_close(got: np.ndarray, want: np.ndarray, what: str, level: int = 24,
                 max_bad: float = 0.002, max_mean: float = 0.5):
    """uint8 rows: at most `max_bad` of the pixels differ by more than `level` in a channel,
    and the mean difference is at most `max_mean` levels."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    d = np.abs(got.astype(np.int32) - want.astype(np.int32)).max(axis=2)
    bad = (d > level).mean()
    assert bad <= max_bad and d.mean() <= max_mean, (
        f"{what}: {bad:.2%} of the pixels differ by more than {level} (at most {max_bad:.2%}), "
        f"mean difference {d.mean():.2f} levels (at most {max_mean}); first differing pixels "
        f"(x, y from the top): {list(zip(*np.nonzero(d.T > level)))[:8]}")
