"""Tests of the scripts of benchmarks/ (tiny sizes, no measurement)."""
