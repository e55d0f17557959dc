// counting.wgsl with subgroup operations (the device has wgpu's SUBGROUP
// feature): the invocations of a subgroup that append or add together
// take one atomic between them. Refused keys of an over-full insert are
// appended by many invocations at once, all on one counter, which then
// serialises; a subgroup's appends become one atomic and a scan.
//
// The operations act on the invocations active at the call, whichever they
// are, so the callers need not be in uniform control flow: the lowest
// active invocation (rank 0 of the scan, and the one subgroupBroadcastFirst
// reads) takes the atomic for all of them.

// Appends `entry` to the `flags` list.
fn report(entry: u32) {
    let rank = subgroupExclusiveAdd(1u);
    let total = subgroupAdd(1u);
    var first = 0u;
    if (rank == 0u) {
        first = atomicAdd(&counters[1], total);
    }
    flags[subgroupBroadcastFirst(first) + rank] = entry;
}

// Adds this workgroup's `count` to counters[0]: one workgroup atomic per
// subgroup, one global atomic per group. Called by every invocation of the
// group (a barrier inside).
fn add_count(count: u32, lid: u32) {
    let sum = subgroupAdd(count);
    if (subgroupExclusiveAdd(1u) == 0u && sum != 0u) {
        atomicAdd(&wg_count, sum);
    }
    publish_count(lid);
}
