"""The hooks DeAR hangs on the model: a forward pre-hook on every module (they trace the
forward order, then apply each bucket's pending update just before the bucket's first module
runs), one post-accumulate-grad hook per parameter (it fills the bucket and starts
reduce-scatters), and a state_dict pre-hook on the model (a checkpoint flushes first)."""
import weakref


def owning_modules(model, wanted):
    """[(module, [params it owns directly that are in `wanted`])], registration order. A tied
    parameter is listed under every module that owns it."""
    out = []
    for m in model.modules():
        mine = [p for p in m.parameters(recurse=False) if id(p) in wanted]
        if mine:
            out.append((m, mine))
    return out


def install(owner, model, params):
    """Registers every hook; returns the handles (call .remove() on each to undo).

    owner must provide _forward_pre(module) and _grad_ready(param); it is held weakly so that
    the hooks do not keep a dropped optimizer alive."""
    ref = weakref.ref(owner)
    handles = []

    def pre(module, _args):
        o = ref()
        if o is not None:
            o._forward_pre(module)

    for m in model.modules():
        handles.append(m.register_forward_pre_hook(pre))

    def grad_hook(p):
        o = ref()
        if o is not None:
            o._grad_ready(p)

    for p in params:
        if not hasattr(p, "register_post_accumulate_grad_hook"):
            raise NotImplementedError("pipeline='dear' needs torch >= 2.1 "
                                      "(Tensor.register_post_accumulate_grad_hook)")
        handles.append(p.register_post_accumulate_grad_hook(grad_hook))

    def before_state_dict(*_args, **_kwargs):
        o = ref()
        if o is not None:
            o.flush()

    if hasattr(model, "register_state_dict_pre_hook"):
        handles.append(model.register_state_dict_pre_hook(before_state_dict))
    return handles
