// Reductions of an insert-or-apply into slots, one atomic per value: the
// browser's WebGPU and adapters without subgroup operations.
// fold_subgroups.wgsl is the same with fewer atomics on repeated keys.

// Reduces value `v` into slot `s` (GH_NONE: nothing to reduce). Called by
// every invocation of the group in uniform control flow, as the subgroup
// version needs.
fn reduce_grouped(s: u32, v: vec2<u32>) {
    if (s != GH_NONE) {
        reduce_into(s, v);
    }
}
