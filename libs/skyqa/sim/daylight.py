"""The built-in simulator's daylight: a sky ambient and one sun, both slightly tinted.

A surface of albedo ``c`` renders as ``c * (AMBIENT + SUNLIGHT * lam)`` with ``lam`` in [0, 1]
(the cosine to the sun, 0 in shadow), before haze. The shader uses these; the heuristic
labeller uses them to name a colour under any shading, as a white balance with a known
illuminant would.
"""

from __future__ import annotations

import numpy as np

SUN = (np.array([0.45, -0.35, 0.82]) / np.linalg.norm([0.45, -0.35, 0.82])).astype(np.float32)
AMBIENT = np.array([0.40, 0.42, 0.47], dtype=np.float32)
SUNLIGHT = np.array([0.68, 0.65, 0.58], dtype=np.float32)
