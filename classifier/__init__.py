"""Complexity classifier: predicts a request's tier (1 simple .. 4 expert).

Serving imports only `classifier.runtime` (numpy + onnxruntime); training, export and
calibration live in separate modules that the gateway never loads.
"""
