"""kerasfit's semantic model: one package whose modules are layered by an import-linter
contract (pyproject.toml, ``kerasfit.semantic: model > facts > ...``: the one statement of
the order; ``if TYPE_CHECKING`` imports count). A part is typed against the protocols of
:mod:`.views` (what it asks of the model and of the other parts), never against
:class:`.model.SemanticModel`.

Rules reach it only through ``kerasfit.ruleapi``: their context (``self.ctx``, a
``RuleContext`` over the per-file :class:`.model.SemanticModel`) asks the model's typed
parts, each answering questions about a node passed in — no question depends on where the engine's walk is. Everything
is lazy: a file whose rules ask nothing of a part pays nothing for it.

What each module holds (a part is handed the lower parts it needs):

- :mod:`.folding` — constant folding's arithmetic (binary, unary and comparison operators
  of libcst and ``ast`` alike, with the size limits) and its ``Budget`` (steps, depth, every
  limit as a named constant), shared by the libcst model and the ``ast`` summaries.
- :mod:`.nodes` — syntax only: walks (``walk``, ``iter_children``, ``iter_statements``),
  ``dotted_name``, ``get_arg``, ``string_value``, ``UNKNOWN``, ``ScopeNode``,
  ``bound_names``/``binds``, ``self_attr``, ``class_index``; ``SyntaxMemo`` (one per
  file: the same answers, remembered).
- :mod:`.fileindex` — ``FileIndex``, one walk of a module: parents, source order (and each
  statement's node run the engine's rule walk replays: ``runs``), scopes, calls
  (``all_calls()``), references, stores, dict keys, flag defaults.
- :mod:`.indexparts` — the language server's per-statement file indexes, joined
  (``join_parts(module, state) -> FileIndex``).
- :mod:`.names` — framework names the import lines do not show (``star_names``,
  ``by_name``, ``injected_submodule``). Data: ``kerasfit/data/framework_names.json``.
- :mod:`.treescan` — which files can change a file's tree-wide answers, from a scan of the
  tree's bytes for module names (no parse): ``scan_tree`` → ``TreeScan``; ``file_digest``;
  ``Bounds``, which files the index reads and how much of each (the project layer's
  excludes and size limit; regular files only, no link out of the tree).
- :mod:`.modulefacts` — ``ModuleFacts`` of one file (stdlib ``ast``): imports, functions,
  classes, constants, and names bound in branches (a backend chosen at import time).
- :mod:`.index` — the project index (stdlib ``ast``): ``ProjectIndex(roots, bounds)`` with
  ``facts``, ``resolve``, ``reached_from_model`` (reach across files, from the files the
  scan names: ``local_files``), ``deps_of``; passed in explicitly
  (``LintSettings.project`` → ``SemanticModel(project=...)``).
- :mod:`.summaries` — the interpreter of project functions over ``ast`` summaries:
  ``built_layer(index, facts, dotted, args, kwargs) -> Layer | None``, ``may_return_layer``.
- :mod:`.caches` — ``ModelCaches``: the memos the parts share, declared and typed.
- :mod:`.views` — the protocols the parts are typed against (``FileView``, ``ModelView``,
  ``NamesView``, ``ValuesView``, the memos' views) and the ``CallSites`` record.
- :mod:`.scoped` — references grouped by scope (one grouping per file index).
- :mod:`.scopes` — part ``model.scopes`` (``Scopes``): the file index, scope indexes and
  ``Binding``s, ``lookup(name, at=node)``, ``scopes_of``, ``parent``, ``ancestors``,
  ``enclosing_function/class/callable(node)``, ``reaching_bindings``.
- :mod:`.naming` — part ``model.names`` (``Names``): imports, ``raw_name``, ``resolve``,
  ``call_name``, ``call_name_anywhere``, ``flavour``, resolution by name.
- :mod:`.tensors` — ``TensorNames``: the names of a function that may hold tensors.
- :mod:`.valueflow` — where a value comes from: ``origins``, ``call_chain``,
  ``const_sources`` (of the values part, counted against its :mod:`.folding` budget).
- :mod:`.bridge` — from a libcst call to the project summaries; part ``model.layers``
  (``Layers``): ``built_layer``, ``ops_fed``, ``layer_call_returns``, ``tensor_names``.
- :mod:`.valuesets` — value sets (a may-analysis) and ``off_by_default``, over the values part.
- :mod:`.values` — part ``model.values`` (``Values``): the one constant folder (``const``,
  ``int_const``; its arithmetic and budget from :mod:`.folding`) with its memo, call sites and parameter values, ``possible_values``,
  ``origin(s)``, ``call_chain``, ``const_sources``, ``iterated_elements``.
- :mod:`.roles` — part ``model.roles`` (``Roles``): ``function_role``, ``of(node)``,
  host functions, traced graph code, demo blocks, ``uses_tpu``.
- :mod:`.model` — ``SemanticModel``: the per-file facts (module, source, filename,
  target, options, project, caches, ``file_fact``) composing the parts lazily.
- :mod:`.shapes` — ``shape_of``: the static rank and last-axis size of a tensor expression,
  where the code spells them.
- :mod:`.containers`, :mod:`.precision`, :mod:`.dataflow` and :mod:`.pipeline` — the
  light data-flow, container and ``tf.data`` questions rules ask (through
  ``RuleContext``), each taking the node it is about.
"""
