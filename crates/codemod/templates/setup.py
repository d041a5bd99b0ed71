# Group 3: model set-up probes in setup_model (pithtrain/modules/training.py), one block per label:
# before `modules = []`, after the first and the second `modules.append(...)`, after the `for`
# loop that calls `init_weights`, and after `apply_fsdp(...)`.
# placeholders: none

# block: before_model_creation
_setup_mem("before model creation")

# block: after_module0_creation
_setup_mem("after module[0] creation")

# block: after_module1_creation
_setup_mem("after module[1] creation")

# block: after_init_weights
_setup_mem("after init_weights")

# block: after_apply_fsdp
_setup_mem("after apply_fsdp")
