// Scheme::Linear's claim of a 16-byte slot's key field on adapters with
// 64-bit atomics (wide.wgsl): two invocations with one key walk one probe
// sequence and meet at one slot. The occupancy bitmap of the 32-bit path
// is not kept, since every call on such a table takes this path.

// The slot of key field k, claimed if new (GH_NEW_BIT set), or GH_NONE
// when the probe limit passed first.
fn claim_wide(k: vec2<u32>) -> u32 {
    let key = field64(k);
    var b = home_bucket(k);
    for (var step = 0u; step < params.limit; step += 1u) {
        for (var j = 0u; j < GH_SLOTS_PER_BUCKET; j += 1u) {
            let c = claim_key_field(b * GH_SLOTS_PER_BUCKET + j, key);
            if (c != GH_NONE) {
                return c;
            }
        }
        b = next_bucket(b);
    }
    return GH_NONE;
}
