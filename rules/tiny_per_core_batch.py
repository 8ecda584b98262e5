from __future__ import annotations

from kerasfit.ruleapi import Invalid, Reads, Rule, Severity, Valid


class TinyPerCoreBatch(Rule):
    """
    ## What it does
    Reported only by the build cross-check (`kerasfit check --build`, `kerasfit
    report`): the per-core batch of the traced training step (global batch ÷ cores)
    is under 64, and no static `KF203` finding already says so. It points at the line
    where the batch enters the model (the `keras.Input` or placeholder).

    ## Why is this slow on the accelerator
    XLA picks the padding layout of every convolution from the most common batch size
    in the module. Under 64, the kernel-gradient convolutions pad the batch to 128
    (docs/facts.md#1): a per-core batch of 16 uses 16/128 of the MXU in every weight
    update, whatever the channel counts. Per-replica batch = global batch / replicas
    (docs/facts.md#24).

    ## Example
    ```python
    # global batch 128 on a v3-8: 16 per core
    model.fit(ds.batch(128, drop_remainder=True))
    ```

    ## Use instead
    ```python
    model.fit(ds.batch(128 * strategy.num_replicas_in_sync, drop_remainder=True))
    ```

    ## Fix safety
    No fix: the batch size is a training choice (learning rate and schedule usually
    scale with it). The message gives the built shape, the padded
    shape modelled for it and its fit.

    ## References
    docs/facts.md#1, #6, #24; Cloud TPU performance guide ("Batch size").
    """

    code = "KF302"
    build_evidence = "tiny-per-core-batch"
    name = "tiny-per-core-batch"
    message = "Per-core batch under 64 in the traced training step (build cross-check)"
    severity = Severity.WARNING
    targets = frozenset({"tpu"})
    build_only = True
    reads = frozenset({Reads.STATEMENT})  # build-only: nothing is found while walking

    VALID = (
        Valid(
            """
            import keras

            def build_model():
                inputs = keras.Input((16, 16, 8))
                x = keras.layers.Conv2D(16, 3, padding='same')(inputs)
                return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(x))
            """,
            options={"batch_size": 1024, "cores": 8},
        ),
    )
    INVALID = (
        Invalid(
            """
            import keras

            def build_model():
                inputs = keras.Input((16, 16, 8))
                x = keras.layers.Conv2D(16, 3, padding='same')(inputs)
                return keras.Model(inputs, keras.layers.GlobalAveragePooling2D()(x))
            """,
            options={"batch_size": 128, "cores": 8},
            fields={"per_core_batch": 16},
        ),
    )
