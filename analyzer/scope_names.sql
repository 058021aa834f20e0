-- scope_names.sql: how a scope's name reads (docs/format.md, "Scope annotations"), for the SQL files that
-- need it. Variables: module_prefix, function_prefix, module_separator, names_escaped.
--   ks_scope_text(text): a module or call name as the recording named it: where names_escaped (a recording that
--     percent-escaped the characters Kineto's export mangles, rundir.scope_text), its %XX read back.
--   ks_scope_module(name): the module a scope names: its own (ks.module:<module>), or the one folded into a
--     call's scope (ks.fn:<call>@<module>, after the first separator: call names have none); else NULL.
--   ks_scope_call(name): the call a call scope names, "<function>" or "<function>#<sample id>", without a
--     folded module; else NULL.
--   ks_scope_folded(name): a call scope with a module folded in (ks.fn:<call>@<module>), which ks_scope_module
--     reads too; the name is cut only where the prefix holds the separator (kernelscope's never does): cutting
--     every call scope's name would weigh on ks_enclosers in attribution.sql, which tests every scope.
-- The calls that launch device work, by category:
--   ks_launch_category(cat): the runtime and driver calls whose correlation device events carry, by Kineto's names
--     for them, <device>_runtime and <device>_driver: CUDA's and ROCm's (cuda_runtime, cuda_driver: Kineto files HIP
--     calls there too), Intel XPU's (xpu_runtime, xpu_driver: urEnqueue…, ze…), a PrivateUse1 backend's
--     (privateuse1_runtime, privateuse1_driver), MTIA's (mtia_runtime) and those of Kineto's forks for other devices
--     (Moore Threads' musa_runtime, Cambricon's mlu_runtime…); and the device-agnostic runtime and driver that Kineto's
--     ActivityType now names them all as. Their device events are read as kernel, gpu_memcpy and gpu_memset (ingest.sql).
--   ks_launch_family(cat): the runtime a launch category belongs to: the text before _runtime or _driver ('cuda' for
--     cuda_runtime and cuda_driver, whose calls CUPTI numbers from one counter: "each function invocation is assigned
--     a unique correlation ID", CUpti_ActivityAPI), '' for the device-agnostic runtime and driver. Each runtime numbers
--     its own calls (CUPTI, Intel's PTI, an MTIA or PrivateUse1 plugin), so two runtimes' launches of one trace may
--     share a correlation; two of one runtime may not (validate.sql).
--   ks_device_pid(cat): an aggregate over a pid's events: whether the pid is a device's, one that holds device events
--     (kernel, gpu_memcpy, gpu_memset) and no operator or annotation (cpu_op, user_annotation). Kineto writes device
--     activity under the device's index as pid, and files there the Python frames of a thread it cannot place, and
--     IBM's Spyre plugin its memory releases as privateuse1_driver calls: such a pid launches nothing, whatever calls
--     it holds (process_parts.sql), and its events of a category kernelscope does not model get a note (unmodeled.sql).
-- And the runtime calls the attribution reads by name (its launch check too), of every launch category above, by
-- substring tests (cheaper than a regular expression per runtime call, of which a large trace holds millions):
--   ks_graph_launch(name): a runtime or driver call that replays a graph: cudaGraphLaunch, cuGraphLaunch,
--     hipGraphLaunch, a fork's musaGraphLaunch…, with any suffix (_ptsz, _spt);
--   ks_kernel_launch(name): one that launches a kernel: a call whose name holds "Kernel" and "Launch" or "Invoke":
--     CUDA's cudaLaunchKernel(ExC), cuLaunchKernel(Ex) and their Cooperative variants, ROCm's hipLaunchKernel,
--     hipModuleLaunchKernel, hipExtLaunchMultiKernelMultiDevice…, Moore Threads' musaLaunchKernel, Intel XPU's
--     urEnqueueKernelLaunch, piEnqueueKernelLaunch, piextEnqueueCooperativeKernelLaunch (the calls Kineto's XPU
--     plugin draws flows from, XPUActivity.h) and zeCommandListAppendLaunchKernel, Cambricon's cnInvokeKernel(Ex)
--     (torch_mlu's kineto_mlu traces them), any suffix; not cudaLaunchHostFunc or cnInvokeHostFunc, which run no
--     kernel. Memory copies and sets (cudaMemcpyAsync, hipMemcpyWithStream, hipMemsetAsync…) need no rule: their
--     device events reach them by correlation, whatever their name.
CREATE OR REPLACE MACRO ks_after_first(text, separator) AS text[strpos(text, separator) + length(separator):];

-- (text is bound once, as the lambda's argument: a macro's parameter is a copy of its argument's expression at each
-- use, and the cut names ks_scope_module and ks_scope_call pass it, bound three times, doubled their statements'
-- binding, which on a small trace costs more than running them)
CREATE OR REPLACE MACRO ks_scope_text(text) AS
    list_transform([text], lambda t: CASE WHEN getvariable('names_escaped') AND contains(t, '%') THEN url_decode(t)
                                          ELSE t END)[1];

CREATE OR REPLACE MACRO ks_scope_folded(name) AS
    starts_with(name, getvariable('function_prefix')) AND contains(name, getvariable('module_separator'))
    AND (NOT contains(getvariable('function_prefix'), getvariable('module_separator'))
         OR contains(name[length(getvariable('function_prefix')) + 1:], getvariable('module_separator')));

CREATE OR REPLACE MACRO ks_scope_module(name) AS
    ks_scope_text(CASE WHEN starts_with(name, getvariable('module_prefix'))
                       THEN name[length(getvariable('module_prefix')) + 1:]
                       WHEN ks_scope_folded(name)
                       THEN ks_after_first(name[length(getvariable('function_prefix')) + 1:],
                                           getvariable('module_separator'))
                  END);

CREATE OR REPLACE MACRO ks_scope_call(name) AS
    CASE WHEN starts_with(name, getvariable('function_prefix')) AND NOT starts_with(name, getvariable('module_prefix'))
         THEN ks_scope_text(split_part(name[length(getvariable('function_prefix')) + 1:],
                                       getvariable('module_separator'), 1))
    END;

CREATE OR REPLACE MACRO ks_launch_category(cat) AS
    suffix(cat, '_runtime') OR suffix(cat, '_driver') OR cat IN ('runtime', 'driver');

CREATE OR REPLACE MACRO ks_device_pid(cat) AS
    bool_or(cat IN ('kernel', 'gpu_memcpy', 'gpu_memset')) AND NOT bool_or(cat IN ('cpu_op', 'user_annotation'));

CREATE OR REPLACE MACRO ks_launch_family(cat) AS
    CASE WHEN suffix(cat, '_runtime') THEN left(cat, -8) WHEN suffix(cat, '_driver') THEN left(cat, -7) ELSE '' END;

CREATE OR REPLACE MACRO ks_graph_launch(name) AS contains(name, 'GraphLaunch');

-- ks_capture_step(name): +1 for a call that begins a stream capture (cudaStreamBeginCapture, cuStreamBeginCapture,
--   hipStreamBeginCapture, …ToGraph, any suffix), -1 for one that ends it (…StreamEndCapture), else NULL: the launches
--   a thread makes between the two are recorded into a graph, not run, so they have no device events.
CREATE OR REPLACE MACRO ks_capture_step(name) AS
    CASE WHEN contains(name, 'StreamBeginCapture') THEN 1 WHEN contains(name, 'StreamEndCapture') THEN -1 END;

CREATE OR REPLACE MACRO ks_kernel_launch(name) AS
    contains(name, 'Kernel') AND (contains(name, 'Launch') OR contains(name, 'Invoke'));
