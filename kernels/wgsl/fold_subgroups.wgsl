// fold.wgsl with subgroup operations (the device has wgpu's SUBGROUP
// feature). Copies of one key reduce into one slot, and a hot key's copies
// (zipf-distributed keys, one key repeated millions of times) all hit one
// word, where the atomics queue. So before the atomics, the invocations of
// a subgroup that reduce into the same slot combine their values, and one
// of them takes the atomic for all: a round elects the lowest invocation
// still waiting, and every invocation with its slot joins it.
//
// Measured on an H200 (u32 keys, 2^24 slots, against one atomic per
// value): 8 rounds cost distinct keys under 2% and took zipf(1.2) keys
// from 4.4 to 8.6 G/s; 16 rounds reached 9.7 but cost distinct keys 10%,
// 32 rounds 37%. So 8 rounds always, and more only while they combine.

// Rounds always taken (unless no invocation is left waiting).
const GROUP_ROUNDS: u32 = 8u;
// Rounds at most; past GROUP_ROUNDS, a round whose leader is alone ends it.
const GROUP_ROUNDS_MAX: u32 = 32u;

// The lowest invocation set in a ballot (not all zero).
fn first_lane(b: vec4<u32>) -> u32 {
    if (b.x != 0u) {
        return firstTrailingBit(b.x);
    }
    if (b.y != 0u) {
        return 32u + firstTrailingBit(b.y);
    }
    if (b.z != 0u) {
        return 64u + firstTrailingBit(b.z);
    }
    return 96u + firstTrailingBit(b.w);
}

// The reduction of the values of the invocations with `member` set, by the
// table's operation (those the GPU folds: u32 sum, min and max; i32 sum;
// 64-bit wrapping sums).
fn combine(member: bool, v: vec2<u32>) -> vec2<u32> {
    if (params.kind == GH_KIND_U64 || params.kind == GH_KIND_I64) {
        // A 64-bit sum from 32-bit sums: the low word in 16-bit halves, so
        // its carries are kept (at most 128 invocations of 16 bits each).
        let lo = subgroupAdd(select(0u, v.x & 0xffffu, member));
        let mid = subgroupAdd(select(0u, v.x >> 16u, member)) + (lo >> 16u);
        let hi = subgroupAdd(select(0u, v.y, member)) + (mid >> 16u);
        return vec2<u32>((lo & 0xffffu) | (mid << 16u), hi);
    }
    if (params.op == GH_REDUCE_MIN) {
        return vec2<u32>(subgroupMin(select(0xffffffffu, v.x, member)), 0u);
    }
    if (params.op == GH_REDUCE_MAX) {
        return vec2<u32>(subgroupMax(select(0u, v.x, member)), 0u);
    }
    return vec2<u32>(subgroupAdd(select(0u, v.x, member)), 0u);
}

// Reduces value `v` into slot `s` (GH_NONE: nothing to reduce). Called by
// every invocation of the group in uniform control flow: the shuffles
// read other invocations' values, which must all be active.
fn reduce_grouped(s: u32, v: vec2<u32>) {
    let lane = subgroupExclusiveAdd(1u);
    var waiting = s != GH_NONE;
    for (var round = 0u; round < GROUP_ROUNDS_MAX; round += 1u) {
        let ballot = subgroupBallot(waiting);
        if (all(ballot == vec4<u32>(0u))) {
            break;
        }
        let lead = first_lane(ballot);
        let member = waiting && s == subgroupShuffle(s, lead);
        let value = combine(member, v);
        if (lane == lead) {
            reduce_into(s, value);
        }
        waiting = waiting && !member;
        if (round + 1u >= GROUP_ROUNDS && subgroupAdd(select(0u, 1u, member)) == 1u) {
            break;
        }
    }
    if (waiting) {
        reduce_into(s, v);
    }
}
