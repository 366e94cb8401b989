"""Theory next to the measurement: α-β(-γ) costs of every algorithm, lower
bounds, fitted α/β/γ, theory curves and hardware presets (docs/theory.md).

>>> from ccbench_kit import theory
>>> theory.predict_time("all_reduce", "ring", 1 << 20, 8, alpha=5e-6, beta=1 / 25e9)
>>> theory.fit(ds).to_frame()                       # α, β, γ per algorithm
>>> theory.curve("all_reduce", "ring", sizes, 8, preset="h100-nvlink4")
"""
from .curve import curve, efficiency
from .fit import AlgorithmFit, FitResult, fit
from .models import (Cost, algorithms, bus_factor, cost, has_model, lower_bound,
                     lower_bound_cost, predict_time)
from .presets import Preset
from .presets import get as preset

__all__ = ["AlgorithmFit", "Cost", "FitResult", "Preset", "algorithms", "bus_factor", "cost",
           "curve", "efficiency", "fit", "has_model", "lower_bound", "lower_bound_cost",
           "predict_time", "preset"]
