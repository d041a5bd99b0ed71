# Group 3: model set-up probes in setup_model (pithtrain/modules/training.py).
# Placeholders: LABEL.

# block: probe
_setup_mem("LABEL")
