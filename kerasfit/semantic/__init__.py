"""kerasfit's semantic model: one package, layered bottom to top (an import-linter contract
in pyproject.toml keeps it so; ``if TYPE_CHECKING`` imports of the façade do not count).

Rules reach it only through ``kerasfit.ruleapi`` and the per-file model handed to them
(``FileContext``, today still the façade over the parts below). Everything is lazy — a
file whose rules ask nothing of a part pays nothing for it.

- :mod:`.folding` — constant folding's arithmetic (binary, unary and comparison operators
  of libcst and ``ast`` alike, with the size limits) and its ``Budget`` (steps, depth, every
  limit as a named constant), shared by the libcst model and the ``ast`` summaries.
- :mod:`.nodes` — syntax only: walks (``walk``, ``iter_children``, ``iter_statements``),
  ``dotted_name``, ``get_arg``, ``string_value``, ``UNKNOWN``, ``ScopeNode``,
  ``bound_names``/``binds``, ``self_attr``, ``class_index``; ``SyntaxMemo`` (one per
  file: the same answers, remembered).
- :mod:`.fileindex` — ``FileIndex``, one walk of a module: parents, source order, scopes,
  calls (``all_calls()``), references, stores, dict keys, flag defaults.
- :mod:`.indexparts` — the language server's per-statement file indexes, joined
  (``join_parts(module, state) -> FileIndex``).
- :mod:`.names` — framework names the import lines do not show (``star_names``,
  ``by_name``, ``injected_submodule``). Data: ``kerasfit/data/framework_names.json``.
- :mod:`.index` — the project index (stdlib ``ast``): ``ProjectIndex(roots)`` with
  ``facts``, ``resolve``, ``reached_from_model`` (reach across files), ``deps_of``;
  passed in explicitly (``LintSettings.project`` → ``FileContext(project=...)``).
- :mod:`.summaries` — the interpreter of project functions over ``ast`` summaries:
  ``built_layer(index, facts, dotted, args, kwargs) -> Layer | None``, ``may_return_layer``.
- :mod:`.scoped`, :mod:`.containers`, :mod:`.values`, :mod:`.tensors`, :mod:`.roles`,
  :mod:`.bridge` — parts asked through the model: references by scope, layers kept in
  containers, value sets, tensor-holding names, host/traced functions, and the bridge
  from a libcst call to the project summaries.
- :mod:`.caches` — ``ModelCaches``: every memo of the parts, declared and typed.
- :mod:`.model` — ``FileContext``: imports and names, scopes and bindings, constant
  folding over libcst (budgeted by :mod:`.folding`), origins, roles; ``ancestors(node)`` (no cursor for rules).
- :mod:`.dataflow` and :mod:`.pipeline` — the light data-flow and ``tf.data`` questions
  rules ask (exported by ``kerasfit.ruleapi``).
"""
