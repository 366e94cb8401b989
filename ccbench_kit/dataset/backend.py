"""``xarray.open_dataset(path, engine="ccbench")``: our results files, and
(through the importers) any baseline the kit can read."""
from xarray.backends import BackendEntrypoint


class CCBenchBackendEntrypoint(BackendEntrypoint):
    description = "ccbench_kit results (schema ccbench/1) and imported baselines"
    url = "https://github.com/ccbench-kit/ccbench_kit"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, group=None):
        from . import io

        parts = io.open_parts(filename_or_obj)
        ds = parts[group] if group else next(iter(parts.values()))
        return ds.drop_vars(drop_variables or [], errors="ignore")

    def guess_can_open(self, filename_or_obj):
        # Only when asked for by name: plain .nc files belong to netCDF engines.
        return False
