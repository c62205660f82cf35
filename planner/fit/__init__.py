"""Predicted against measured: validate runs files, calibrate profiles."""
