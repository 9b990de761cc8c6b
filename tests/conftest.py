"""pytest configuration for fibre's Python tests: makes the helper modules of
tests/differential (gen, kernelns, run) importable by the test files."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "differential"))
