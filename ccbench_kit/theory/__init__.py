"""Theory next to the measurement: α-β(-γ) costs of every algorithm, lower
bounds, fitted α/β/γ, theory curves and hardware presets (THEORY.md)."""
from .models import (Cost, algorithms, bus_factor, cost, has_model, lower_bound,
                     lower_bound_cost, predict_time)

__all__ = ["Cost", "algorithms", "bus_factor", "cost", "has_model", "lower_bound",
           "lower_bound_cost", "predict_time"]
