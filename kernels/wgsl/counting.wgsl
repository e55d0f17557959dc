// Counted appends and sums with 32-bit atomics only (the browser's WebGPU
// and adapters without subgroup operations); counting_subgroups.wgsl is the
// same with fewer atomics.

// Appends `entry` to the `flags` list.
fn report(entry: u32) {
    let at = atomicAdd(&counters[1], 1u);
    flags[at] = entry;
}

// Adds this workgroup's `count` to counters[0]: one global atomic per group.
// Called by every invocation of the group (a barrier inside).
fn add_count(count: u32, lid: u32) {
    atomicAdd(&wg_count, count);
    publish_count(lid);
}
