from __future__ import annotations

from kerasfit.ruleapi import Invalid, Reads, Rule, Severity, Valid


class PaddedOp(Rule):
    """
    ## What it does
    Reported only by the build cross-check (`kerasfit check --build`, `kerasfit
    report`): a source line whose convolutions or matmuls, in the traced training step,
    use less than half of the matrix unit because their feature dimensions are padded,
    and that no static rule already explains. Typical causes are widths computed at
    run time (from a config file, a loop, `int(...)` of a flag) that static analysis
    cannot fold.

    ## Why is this slow on the accelerator
    The TPU pads the feature dimensions of every convolution and matmul operand to 8
    or 128 (256 on v6e), in the forward pass and again, laid out differently, in the
    input- and kernel-gradient passes (docs/facts.md#1–3, #5, #8). The MXU does the padded
    work; the fit printed is useful work / padded work (docs/facts.md#6).

    ## Example
    ```python
    for width in config["widths"]:          # e.g. [20, 12] read at run time
        x = layers.Dense(width)(x)
    ```

    ## Use instead
    ```python
    for width in config["widths"]:          # [24, 16], or better 128 and up
        x = layers.Dense(width)(x)
    ```

    ## Fix safety
    No fix: the width is not a constant in the source. The message gives the built
    shape, the padded shape modelled for it and the share of the step's FLOPs.

    ## References
    docs/facts.md#1–3, #5, #6, #8; Cloud TPU performance guide ("Tensor dimensions", op_profile).
    """

    code = "KF301"
    build_evidence = "poor-fit"
    name = "padded-op"
    message = "Op in the traced training step is badly padded on the accelerator (build cross-check)"
    severity = Severity.WARNING
    build_only = True
    reads = frozenset({Reads.STATEMENT})  # build-only: nothing is found while walking

    # Built by tests/crosscheck (these run user code: a real TensorFlow build each).
    VALID = (
        Valid(
            """
            import keras

            def build_model():
                inputs = keras.Input((128,))
                x = keras.layers.Dense(128, activation='relu')(inputs)
                return keras.Model(inputs, keras.layers.Dense(128)(x))
            """,
            options={"batch_size": 128},
        ),
    )
    INVALID = (
        Invalid(
            """
            import keras

            def build_model():
                widths = [int(w) for w in '3 5'.split()]  # read at run time
                inputs = keras.Input((8,))
                x = inputs
                for w in widths:
                    x = keras.layers.Dense(w, activation='relu')(x)
                return keras.Model(inputs, keras.layers.Dense(128)(x))
            """,
            options={"batch_size": 128},
            finding="PoorFit",
        ),
    )
