"""The allreduce name of every parameter of an optimizer, as Horovod's optimizers check them."""


def parameter_names(param_groups, named_parameters):
    """{parameter: name} from model.named_parameters() (checked: tuples, unique names, every
    parameter named), or Horovod's "allreduce.noname.<group>.<index>" without them."""
    params = [p for g in param_groups for p in g["params"]]
    if named_parameters is None:
        return {p: "allreduce.noname.%d.%d" % (i, j)
                for i, g in enumerate(param_groups) for j, p in enumerate(g["params"])}
    named = list(named_parameters)
    if any(not isinstance(item, tuple) for item in named):
        raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                         "usually produced by model.named_parameters().")
    names = [name for name, _ in named]
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError("Parameter names in named_parameters must be unique. Found "
                         "duplicates: %s" % ", ".join(dups))
    named_ids = {id(p) for _, p in named}
    unnamed = [id(p) for p in params if id(p) not in named_ids]
    if unnamed:
        raise ValueError("named_parameters was specified, but one or more model parameters "
                         "were not named. Python object ids: %s"
                         % ", ".join(str(i) for i in unnamed))
    return {p: name for name, p in sorted(named, key=lambda kv: kv[0])}
