-- frames.sql: the module and call scopes of a plain trace, read off its own Python frames (the `python_function`
-- events of torch.profiler's with_stack=True), for attribution.sql, which takes them as it takes kernelscope's
-- scopes. Only in a trace that holds no kernelscope scope: a kernelscope recording made with with_stack keeps its
-- own. Table ks_frame_scopes(event_id, pid, tid, ts_ns, end_ns, kind, name), one row per frame that is a scope:
--   kind 0, a module frame ("nn.Module: BertLayer_3"): name is the module prefix and the dotted chain of the module
--     frames that hold the frame's start on its thread, outermost first, each as the frame names it
--     (ks.module:BertModel_0.BertEncoder_0.BertLayer_3: torch numbers each class's instances);
--   kind 1, a call frame: name is the function prefix and the call as the recorder names it (recorder/calls.py):
--     a torch.nn.functional (torch/nn/functional.py(2889): layer_norm, <built-in function linear>, and
--     <built-in method conv2d of type object>, as F.conv2d is torch.conv2d), or a torch-level call: torch.<name>
--     (<built-in method addmm of type object>, torch/functional.py(…): einsum), torch.linalg.<name>, torch.fft.<name>,
--     torch.special.<name> (<built-in function linalg_vector_norm>), Tensor.<name> (<built-in method add of Tensor
--     object>, <method 'add' of 'torch._C.TensorBase' objects>, torch/_tensor.py(…): __rsub__), and the CUDA graph
--     replay (torch/cuda/graphs.py(…): replay), named as the recorder names its kernels. Private names are no call
--     (_has_torch_function, <built-in method _foreach_copy_ …>) but for the recorder's operators (__add__…), and so
--     are the names frame_names.sql lists without a call (the recorder's calls that launch no kernel: view,
--     transpose…), and any other frame.
-- As in a recording, a torch-level call inside another call is that call's business and no scope (torch.layer_norm
-- inside F.layer_norm; torch.norm inside Tensor.norm; torch.arange inside torch.arange, through a TorchFunctionMode),
-- while every functional is one, so attribution.sql's innermost call is the innermost functional, else the
-- outermost torch-level call. Nesting is read from time on the thread, as for every other scope, not from the
-- frames' "Python parent id" args (a parent chain is one join per level of the stack, and would read every frame's
-- args JSON); frames that start together nest in attribution.sql's order (earlier start, then longer, then earlier
-- in the trace).
-- Frame names are classified once per distinct name: a trace repeats a few hundred names over its frames.
-- Runs only where frames_needed.sql says so (run.py). Variables: module_prefix, function_prefix; table
-- ks_frame_names (frame_names.sql).
SET prefer_range_joins = true;  -- the containment joins below are range joins, as in attribution.sql
SET merge_join_threshold = 0;

-- Each distinct frame name: its kind (0 module, 1 call) and scope name, NULL for a frame that is no scope. The
-- distinct names are a table of their own: in one statement the planner pushed the filter on the names through the
-- DISTINCT, and ran the regular expressions once per frame instead of once per name.
CREATE OR REPLACE TEMP TABLE ks_frame_distinct AS
SELECT DISTINCT name FROM events WHERE cat = 'python_function';

CREATE OR REPLACE TEMP TABLE ks_frame_kinds AS
WITH
-- form: where the frame's function lives (see frame_names.sql); frame: the function's name
parsed AS (
    SELECT name,
           CASE WHEN starts_with(name, 'nn.Module: ') THEN 'module'
                WHEN starts_with(name, '<built-in function ') THEN 'function'
                WHEN starts_with(name, '<built-in method ') THEN
                    CASE regexp_extract(name, '^<built-in method \S+ of (.*) object at ', 1)
                         WHEN 'type' THEN 'torch'
                         WHEN 'CUDAGraph' THEN 'graph'
                         WHEN 'Parameter' THEN 'Tensor'
                         ELSE CASE WHEN ends_with(regexp_extract(name, '^<built-in method \S+ of (.*) object at ', 1),
                                                  'Tensor') THEN 'Tensor' END
                    END
                WHEN regexp_matches(name, '^<method ''\w+'' of ''torch\._C\._?TensorBase'' objects>$') THEN 'Tensor'
                ELSE CASE regexp_extract(name, '(?:^|[/\\])torch[/\\]'
                                               || '(nn[/\\]functional|functional|_tensor|cuda[/\\]graphs)\.py\(\d+\): \w+$', 1)
                         WHEN '' THEN NULL
                         WHEN '_tensor' THEN 'Tensor'
                         WHEN 'functional' THEN 'torch'
                         WHEN 'cuda/graphs' THEN 'graph'
                         WHEN 'cuda\graphs' THEN 'graph'
                         ELSE 'functional'
                    END
           END AS form,
           CASE WHEN starts_with(name, 'nn.Module: ') THEN name[12:]
                WHEN starts_with(name, '<built-in function ') THEN regexp_extract(name, '^<built-in function (\w+)>$', 1)
                WHEN starts_with(name, '<built-in method ') THEN regexp_extract(name, '^<built-in method (\w+) of ', 1)
                WHEN starts_with(name, '<method ''') THEN regexp_extract(name, '^<method ''(\w+)''', 1)
                ELSE regexp_extract(name, '\(\d+\): (\w+)$', 1)
           END AS frame
    FROM ks_frame_distinct
)
SELECT p.name,
       CAST(CASE WHEN p.form = 'module' THEN 0 ELSE 1 END AS UTINYINT) AS kind,
       CASE WHEN p.form = 'module' THEN getvariable('module_prefix') || p.frame
            ELSE getvariable('function_prefix') || CASE
                WHEN n.form IS NOT NULL THEN n.call  -- frame_names.sql's call, or none
                WHEN starts_with(p.frame, '_') THEN NULL
                WHEN p.form = 'functional' THEN p.frame
                WHEN p.form = 'torch' THEN 'torch.' || p.frame
                WHEN p.form = 'Tensor' THEN 'Tensor.' || p.frame
                WHEN p.form = 'function' AND starts_with(p.frame, 'linalg_') THEN 'torch.linalg.' || p.frame[8:]
                WHEN p.form = 'function' AND starts_with(p.frame, 'fft_') THEN 'torch.fft.' || p.frame[5:]
                WHEN p.form = 'function' AND starts_with(p.frame, 'special_') THEN 'torch.special.' || p.frame[9:]
            END
       END AS label
FROM parsed p
LEFT JOIN ks_frame_names n ON n.form = p.form AND n.frame = p.frame
WHERE p.form IS NOT NULL AND p.frame <> '';
DROP TABLE ks_frame_names;
DROP TABLE ks_frame_distinct;

-- The frames that are scopes, before torch-level calls inside other calls are dropped.
CREATE OR REPLACE TEMP TABLE ks_frame_scopes AS
SELECT f.event_id, f.pid, f.tid, f.ts_ns, f.ts_ns + f.dur_ns AS end_ns, k.kind, k.label AS name
FROM events f JOIN ks_frame_kinds k USING (name)
WHERE f.cat = 'python_function' AND f.ph = 'X' AND f.ts_ns IS NOT NULL AND f.dur_ns > 0 AND f.pid IS NOT NULL
  AND f.tid IS NOT NULL AND k.label IS NOT NULL;
DROP TABLE ks_frame_kinds;

-- Torch-level calls (a dotted name) whose start another call holds.
CREATE OR REPLACE TEMP TABLE ks_inner_calls AS
SELECT DISTINCT i.event_id
FROM (SELECT * FROM ks_frame_scopes
      WHERE kind = 1 AND contains(name[length(getvariable('function_prefix')) + 1:], '.')) i
JOIN (SELECT * FROM ks_frame_scopes WHERE kind = 1) o
  ON o.pid = i.pid AND o.tid = i.tid AND o.ts_ns <= i.ts_ns AND i.ts_ns < o.end_ns
WHERE [o.ts_ns, -o.end_ns, o.event_id] < [i.ts_ns, -i.end_ns, i.event_id];

-- Each module frame's chain: its parent is the innermost other module frame that holds its start; a chain is its
-- parent's chain and its own name, built down from the outermost frames, one level of modules per step (cheaper than an
-- ordered string_agg over every frame's ancestors).
CREATE OR REPLACE TEMP TABLE ks_module_chains AS
SELECT m.event_id, max({s: a.ts_ns, e: -a.end_ns, id: a.event_id}).id AS parent
FROM (SELECT * FROM ks_frame_scopes WHERE kind = 0) m
JOIN (SELECT * FROM ks_frame_scopes WHERE kind = 0) a
  ON a.pid = m.pid AND a.tid = m.tid AND a.ts_ns <= m.ts_ns AND m.ts_ns < a.end_ns
WHERE [a.ts_ns, -a.end_ns, a.event_id] < [m.ts_ns, -m.end_ns, m.event_id]
GROUP BY m.event_id;

CREATE OR REPLACE TEMP TABLE ks_module_chains AS
WITH RECURSIVE
parents AS (
    SELECT s.event_id, s.name[length(getvariable('module_prefix')) + 1:] AS label, c.parent
    FROM ks_frame_scopes s LEFT JOIN ks_module_chains c USING (event_id)
    WHERE s.kind = 0
),
chains AS (
    SELECT event_id, label AS chain FROM parents WHERE parent IS NULL
    UNION ALL
    SELECT p.event_id, c.chain || '.' || p.label FROM chains c JOIN parents p ON p.parent = c.event_id
)
SELECT event_id, getvariable('module_prefix') || chain AS name FROM chains;

CREATE OR REPLACE TEMP TABLE ks_frame_scopes AS
SELECT s.event_id, s.pid, s.tid, s.ts_ns, s.end_ns, s.kind, coalesce(c.name, s.name) AS name
FROM ks_frame_scopes s
LEFT JOIN ks_module_chains c USING (event_id)
WHERE s.event_id NOT IN (SELECT event_id FROM ks_inner_calls);
DROP TABLE ks_inner_calls;
DROP TABLE ks_module_chains;

-- The scopes' names attribution.sql reads (frames_needed.sql): a frame that is a scope by its scope's name.
CREATE OR REPLACE TEMP VIEW ks_scope_names AS
SELECT e.event_id, coalesce(f.name, e.name) AS name FROM events e LEFT JOIN ks_frame_scopes f USING (event_id);
