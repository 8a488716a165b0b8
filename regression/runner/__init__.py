"""The regression runner's modules, one concern each (docs/regression.md, "The
runner"); regression/run is the command that puts them together."""
