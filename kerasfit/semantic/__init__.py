"""kerasfit's semantic model beside :class:`~kerasfit.context.FileContext`.

Rules never import this package: they ask the file context (the facade), which delegates
here. Everything is lazy — a file whose rules ask nothing of it pays nothing.

Modules and their public API (stable; other branches build on it):

- :mod:`.names` — framework names the import lines do not show:
  ``star_names(module) -> frozenset[str] | None`` (what ``from keras.layers import *``
  binds) and ``by_name(tail) -> str | None`` (an attribute spelling only Keras/TF use,
  for a receiver that cannot be resolved: ``layers.ZeroPadding2D`` with ``layers =
  VersionAwareLayers()``). Data: ``kerasfit/data/framework_names.json``.
- :mod:`.index` — the project index: ``ProjectIndex(roots)`` with ``facts(path)``,
  ``resolve(from_path, raw_dotted) -> Symbol | None`` (framework re-exports and project
  functions across files), ``reached_from_model(path, function_name) -> bool`` and
  ``deps_of(path)`` (files consulted, with their content hashes);
  passed in explicitly (``LintSettings.project`` → ``FileContext(project=...)``).
- :mod:`.flow` — ``built_layer(index, facts, dotted, args, kwargs) -> Layer | None``:
  what a call of a project factory (``DarknetConv2D_BN_Leaky(64, (3, 3), strides=(2, 2))``)
  builds first, each argument a set of possible values (a may-analysis).
- :mod:`.values` — value sets of libcst expressions: ``possible_values(ctx, node)``.
- :mod:`.containers` — layers kept in lists / dicts / ``Sequential.add``: ``contents(ctx,
  base)`` (one period of elements in construction order), ``element_candidates(ctx, expr)``
  for ``C[i]`` and loop variables, ``applied_in_order(ctx, call)`` for ``x = layer(x)``
  loops. Rules reach it through ``kerasfit.ruleapi`` (``layer_constructor`` answers for
  container elements; ``container_contents``, ``element_candidates``, ``loop_source``,
  ``applied_in_order``).
- :mod:`.names` also resolves framework submodules handed in at run time
  (``injected_submodule``: keras_applications' ``get_submodules_from_kwargs``).
- :mod:`.scoped` — the file index's references grouped by scope, built once per file:
  ``name_refs_in(ctx, name, scope)``, ``attr_refs_within(ctx, attr, scope)`` (the
  facade has ``ctx.name_refs_in``).
- :mod:`.roles` and :mod:`.tensors` — which functions run on the host (metric_fn,
  serving_input_fn, drivers, augmentation) and which names hold tensors (in-function data flow).

FileContext facade methods that route here: ``ctx.project``, ``ctx.built_layer(call)``,
``ctx.possible_values(node)``, ``ctx.by_name(node)``, ``ctx.reached_from_model(func)``.
"""
