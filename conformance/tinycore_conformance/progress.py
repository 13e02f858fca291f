"""Progress of the conformance run, a bar per level (tinycore.helpers.tqdm: tests done of the level's total, ETA) on
stderr, so a long level (the renderer's every op x dtype, the tensor level) shows it is working; a level done within
5 s shows none. On a terminal the bar redraws in place; otherwise a plain line every tenth of the level. Turned on by
`--progress` (the command `python -m tinycore_conformance` passes it; a plain pytest run prints as pytest does)."""
from __future__ import annotations
import collections
from typing import Any
from tinycore_conformance.report import LAYERS

class LevelProgress:
  """One bar per level, opened at the level's first finished test and closed when the next level begins."""
  def __init__(self, layers: list[int]):
    self.total = collections.Counter(layers)
    self.layer: int | None = None
    self.bar: Any = None
  def done(self, layer: int) -> None:
    """A test of `layer` finished."""
    if layer != self.layer:
      self.close()
      from tinycore.helpers import tqdm
      self.layer, self.bar = layer, tqdm(total=self.total[layer], desc=f"level {layer} ({LAYERS.get(layer, '?')})", unit="test", delay=5)
    self.bar.update(1)
  def close(self) -> None:
    if self.bar is not None: self.bar.close()
    self.layer, self.bar = None, None
