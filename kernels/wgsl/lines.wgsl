// Lookups that read whole buckets (the linear and cuckoo schemes): a
// bucket is two 16-byte lines (one 32-byte sector), read with two plain
// vector loads. Atomic loads fetch each word on its own, which made
// lookups read the table several times over. Only `find` uses this
// view (the scheme's lookup(k), which bulk.wgsl's `find` calls), and
// lookups run while nothing writes.

@group(0) @binding(1) var<storage, read_write> slot_lines: array<vec4<u32>>;

// One slot's verdict on key k, as (decided, hit, value lo, value hi):
// decided when the slot holds k, or, with `empty_ends`, is EMPTY (k is
// absent: the probe ends there).
fn verdict(slot_key: vec2<u32>, value: vec2<u32>, k: vec2<u32>, empty_ends: bool) -> vec4<u32> {
    if (all(slot_key == k)) {
        return vec4<u32>(1u, 1u, value);
    }
    return vec4<u32>(select(0u, 1u, empty_ends && all(slot_key == EMPTY_KEY)), 0u, 0u, 0u);
}

// Bucket b's verdict on key k: its slots' verdicts in order, the first
// decided one. (No local array of a bucket's slots: a dynamically indexed
// array lands in local memory, three times slower on an NVIDIA GPU.)
fn bucket_lookup(b: u32, k: vec2<u32>, empty_ends: bool) -> vec4<u32> {
    let a = slot_lines[2u * b];
    let c = slot_lines[2u * b + 1u];
    var d: vec4<u32>;
    if (GH_FIELD_WORDS == 1u) {
        // Four 8-byte slots, [key | value] twice per line.
        d = verdict(vec2<u32>(a.x, 0u), vec2<u32>(a.y, 0u), k, empty_ends);
        if (d.x == 0u) {
            d = verdict(vec2<u32>(a.z, 0u), vec2<u32>(a.w, 0u), k, empty_ends);
        }
        if (d.x == 0u) {
            d = verdict(vec2<u32>(c.x, 0u), vec2<u32>(c.y, 0u), k, empty_ends);
        }
        if (d.x == 0u) {
            d = verdict(vec2<u32>(c.z, 0u), vec2<u32>(c.w, 0u), k, empty_ends);
        }
    } else {
        // Two 16-byte slots, a line each: [key lo | key hi | value lo | value hi].
        d = verdict(a.xy, a.zw, k, empty_ends);
        if (d.x == 0u) {
            d = verdict(c.xy, c.zw, k, empty_ends);
        }
    }
    return d;
}

// Slot s through the lines, as (key lo, key hi, value lo, value hi).
fn line_slot(s: u32) -> vec4<u32> {
    if (GH_FIELD_WORDS == 1u) {
        let l = slot_lines[s / 2u];
        if ((s & 1u) == 0u) {
            return vec4<u32>(l.x, 0u, l.y, 0u);
        }
        return vec4<u32>(l.z, 0u, l.w, 0u);
    }
    return slot_lines[s];
}
