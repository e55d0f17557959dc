// The WebGPU seed's comparison: a mixed workload (30% insert, 30% delete,
// 40% lookup) on gpuhash compiled to WebAssembly (its CPU backend, and its
// wgpu backend on the browser's WebGPU adapter when there is one), JS Map
// and JS Set, at several table sizes. Map is also the oracle: every gpuhash
// result is compared with it, and a disagreement fails the run. The outcome goes into
// <pre id=result> as JSON (and is POSTed to /result with ?post=1, for the
// end-to-end test).
import init, { GpuTable, Table } from "./pkg/gpuhash_web.js";

const q = new URLSearchParams(location.search);
const numbers = (s) => s.split(",").map((x) => Number(x.trim()));
const SIZES = numbers(q.get("sizes") ?? "10000,100000,1000000,4000000");
// Most operations per round of bulk calls: the seed's dispatch size.
const BATCH = Number(q.get("batch") ?? 1 << 20);
// A round has at most a tenth of the table's keys in operations (the seed's
// 1M-operation dispatches on a 20M table are a twentieth): a round applies
// all its inserts, then its deletes, so a longer one would fill the key
// universe and then empty it, instead of keeping the table half full.
const ROUND_SHARE = 10;
// Least operations per size, so small tables run long enough to time.
const MIN_OPS = Number(q.get("ops") ?? 1 << 20);
// Test hook: corrupt one gpuhash lookup to show that a mismatch fails loudly.
const INJECT = q.has("inject");
// webgpu=0 leaves the WebGPU table out.
const WEBGPU = q.get("webgpu") !== "0";
// scheme=NAME: the WebGPU table's placement scheme (linear, cuckoo,
// two-level or slab-list; the wasm CPU table stays linear).
const SCHEME = q.get("scheme") ?? "linear";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");
const say = (msg) => {
  statusEl.textContent = msg;
  console.log(msg);
};
// Lets the page repaint between long synchronous runs.
const breathe = () => new Promise((r) => setTimeout(r, 0));

// mulberry32: small, seeded, replayable.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

// A bijection on u32 (xor-shifts and odd multipliers are invertible), so
// universe keys are distinct yet spread over the whole key range, markers
// included.
function scatter(i) {
  let x = i >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  return (x ^ (x >>> 16)) >>> 0;
}

// A key's value in round b: every copy of a key within one round carries the
// same value, since which copy wins a bulk insert is unspecified.
const valueOf = (key, b) => (scatter(key ^ Math.imul(b + 1, 0x9e3779b9)) >>> 0);

// The workload for a table of n keys: a universe of 2n keys, half of them
// present at the start (every other one), and rounds of operations on
// uniformly drawn universe keys, which keep about half present throughout.
function workload(n, seed) {
  const universe = 2 * n;
  const prefill = new Uint32Array(n);
  const prefillValues = new Uint32Array(n);
  for (let i = 0; i < n; i++) {
    prefill[i] = scatter(2 * i);
    prefillValues[i] = valueOf(prefill[i], -1);
  }
  const total = Math.max(2 * n, MIN_OPS);
  const roundLen = Math.min(BATCH, Math.ceil(n / ROUND_SHARE));
  const next = rng(seed);
  const rounds = [];
  const kinds = new Uint8Array(Math.min(roundLen, total));
  const keys = new Uint32Array(Math.min(roundLen, total));
  for (let done = 0, b = 0; done < total; b++) {
    const len = Math.min(roundLen, total - done);
    const count = [0, 0, 0];
    for (let i = 0; i < len; i++) {
      const r = next() % 10;
      kinds[i] = r < 3 ? 0 : r < 6 ? 1 : 2;
      keys[i] = scatter(next() % universe);
      count[kinds[i]]++;
    }
    const round = {
      ins: new Uint32Array(count[0]),
      insValues: new Uint32Array(count[0]),
      del: new Uint32Array(count[1]),
      look: new Uint32Array(count[2]),
    };
    const at = [0, 0, 0];
    for (let i = 0; i < len; i++) {
      const k = keys[i];
      if (kinds[i] === 0) {
        round.insValues[at[0]] = valueOf(k, b);
        round.ins[at[0]++] = k;
      } else if (kinds[i] === 1) {
        round.del[at[1]++] = k;
      } else {
        round.look[at[2]++] = k;
      }
    }
    rounds.push(round);
    done += len;
  }
  return { n, universe, prefill, prefillValues, rounds, ops: total, roundLen };
}

// Each run applies a round as gpuhash's bulk calls do: its inserts, then its
// deletes, then its lookups; each records what it saw for the comparison.
function outputs(w) {
  return w.rounds.map((r) => ({
    inserted: 0,
    erased: 0,
    values: new Uint32Array(r.look.length),
    found: new Uint8Array(r.look.length),
  }));
}

// Every universe key, for reading a table's final contents.
function universeKeys(w) {
  const all = new Uint32Array(w.universe);
  for (let i = 0; i < w.universe; i++) all[i] = scatter(i);
  return all;
}

function runGpuhash(w) {
  const t = new Table(w.n, "cpu");
  try {
    t.insert(w.prefill, w.prefillValues);
    const out = outputs(w);
    const t0 = performance.now();
    for (let b = 0; b < w.rounds.length; b++) {
      const r = w.rounds[b], o = out[b];
      o.inserted = t.insert(r.ins, r.insValues);
      o.erased = t.erase(r.del);
      t.find(r.look, o.values, o.found);
    }
    const ms = performance.now() - t0;
    const all = universeKeys(w);
    const final = { values: new Uint32Array(all.length), found: new Uint8Array(all.length) };
    t.find(all, final.values, final.found);
    return { ms, out, final, size: t.size };
  } finally {
    t.free();
  }
}

// The same rounds on the WebGPU table, awaiting each call.
async function runWebGPU(w) {
  const t = await GpuTable.create(w.n, SCHEME);
  try {
    await t.insert(w.prefill, w.prefillValues);
    const out = outputs(w);
    const t0 = performance.now();
    for (let b = 0; b < w.rounds.length; b++) {
      const r = w.rounds[b], o = out[b];
      o.inserted = await t.insert(r.ins, r.insValues);
      o.erased = await t.erase(r.del);
      await t.find(r.look, o.values, o.found);
    }
    const ms = performance.now() - t0;
    const all = universeKeys(w);
    const final = { values: new Uint32Array(all.length), found: new Uint8Array(all.length) };
    await t.find(all, final.values, final.found);
    return { ms, out, final, size: t.size(), adapter: t.adapter(), scheme: t.scheme() };
  } finally {
    t.free();
  }
}

function runMap(w) {
  const m = new Map();
  for (let i = 0; i < w.prefill.length; i++) m.set(w.prefill[i], w.prefillValues[i]);
  const out = outputs(w);
  const t0 = performance.now();
  for (let b = 0; b < w.rounds.length; b++) {
    const r = w.rounds[b], o = out[b];
    const before = m.size;
    for (let i = 0; i < r.ins.length; i++) m.set(r.ins[i], r.insValues[i]);
    o.inserted = m.size - before;
    let erased = 0;
    for (let i = 0; i < r.del.length; i++) erased += m.delete(r.del[i]);
    o.erased = erased;
    for (let i = 0; i < r.look.length; i++) {
      const v = m.get(r.look[i]);
      if (v !== undefined) {
        o.values[i] = v;
        o.found[i] = 1;
      }
    }
  }
  const ms = performance.now() - t0;
  return { ms, out, map: m };
}

function runSet(w) {
  const s = new Set(w.prefill);
  const out = outputs(w);
  const t0 = performance.now();
  for (let b = 0; b < w.rounds.length; b++) {
    const r = w.rounds[b], o = out[b];
    const before = s.size;
    for (let i = 0; i < r.ins.length; i++) s.add(r.ins[i]);
    o.inserted = s.size - before;
    let erased = 0;
    for (let i = 0; i < r.del.length; i++) erased += s.delete(r.del[i]);
    o.erased = erased;
    for (let i = 0; i < r.look.length; i++) o.found[i] = s.has(r.look[i]) ? 1 : 0;
  }
  const ms = performance.now() - t0;
  return { ms, out, size: s.size };
}

// Every disagreement between a gpuhash run (g) and the Map oracle (m), the
// first few spelled out; Set (s, when given) must agree with Map on counts
// and membership too.
function compare(w, g, m, s) {
  const bad = [];
  let count = 0;
  const note = (what) => {
    count++;
    if (bad.length < 5) bad.push(what);
  };
  for (let b = 0; b < w.rounds.length; b++) {
    const go = g.out[b], mo = m.out[b], so = s ? s.out[b] : mo, look = w.rounds[b].look;
    if (go.inserted !== mo.inserted) note(`round ${b}: gpuhash inserted ${go.inserted} new keys, Map ${mo.inserted}`);
    if (go.erased !== mo.erased) note(`round ${b}: gpuhash erased ${go.erased} keys, Map ${mo.erased}`);
    if (so.inserted !== mo.inserted || so.erased !== mo.erased) note(`round ${b}: Set's counts differ from Map's`);
    for (let i = 0; i < look.length; i++) {
      if (go.found[i] !== mo.found[i] || (mo.found[i] && go.values[i] !== mo.values[i])) {
        const show = (o) => (o.found[i] ? o.values[i] : "absent");
        note(`round ${b}: lookup of ${look[i]}: gpuhash ${show(go)}, Map ${show(mo)}`);
      }
      if (so.found[i] !== mo.found[i]) note(`round ${b}: Set's lookup of ${look[i]} differs from Map's`);
    }
  }
  // The final contents: every universe key.
  const all = universeKeys(w);
  const { values, found } = g.final;
  for (let i = 0; i < all.length; i++) {
    const v = m.map.get(all[i]);
    if ((v !== undefined) !== (found[i] === 1) || (v !== undefined && v !== values[i])) {
      note(`final contents: key ${all[i]}: gpuhash ${found[i] ? values[i] : "absent"}, Map ${v ?? "absent"}`);
    }
  }
  if (g.size !== m.map.size) note(`final size: gpuhash ${g.size}, Map ${m.map.size}`);
  if (s && s.size !== m.map.size) note(`final size: Set ${s.size}, Map ${m.map.size}`);
  return { count, examples: bad };
}

// A thrown Error with a message for each bad argument, never a WebAssembly
// trap (a Rust panic), and the module still usable afterwards.
function badInputChecks() {
  const t = new Table(16, "cpu");
  const u = (n) => new Uint32Array(n);
  const cases = [
    ["capacity 0", () => new Table(0, "cpu")],
    ["capacity -1", () => new Table(-1, "cpu")],
    ["capacity 1.5", () => new Table(1.5, "cpu")],
    ["capacity NaN", () => new Table(NaN, "cpu")],
    ["capacity 'many'", () => new Table("many", "cpu")],
    ["capacity 2^40", () => new Table(2 ** 40, "cpu")],
    ["unknown device", () => new Table(16, "gpu")],
    ["device webgpu (Table is the CPU one)", () => new Table(16, "webgpu")],
    ["insert: fewer values than keys", () => t.insert(u(3), u(2))],
    ["find: short value output", () => t.find(u(3), u(2), new Uint8Array(3))],
    ["find: short found output", () => t.find(u(3), u(3), new Uint8Array(2))],
  ];
  const checks = cases.map(([name, f]) => {
    try {
      f();
      return { case: name, ok: false, message: "did not throw" };
    } catch (e) {
      const trap = e instanceof WebAssembly.RuntimeError;
      return { case: name, ok: e instanceof Error && !trap && e.message.length > 0, message: String(e.message ?? e) };
    }
  });
  // Still usable: the refused calls stored nothing.
  t.insert(new Uint32Array([7, 8]), new Uint32Array([70, 80]));
  const v = u(3), f = new Uint8Array(3);
  t.find(new Uint32Array([8, 7, 9]), v, f);
  const usable = t.size === 2 && v[0] === 80 && v[1] === 70 && f.join() === "1,1,0";
  checks.push({ case: "table usable after refused calls", ok: usable, message: usable ? "" : `size ${t.size}` });
  t.free();
  return checks;
}

// The same for the WebGPU table: rejected Promises carrying Errors.
async function gpuBadInputChecks() {
  const t = await GpuTable.create(16);
  const u = (n) => new Uint32Array(n);
  const cases = [
    ["create(0)", () => GpuTable.create(0)],
    ["create(NaN)", () => GpuTable.create(NaN)],
    ["create with a scheme wgpu lacks", () => GpuTable.create(16, "robin-hood")],
    ["create with an unknown scheme", () => GpuTable.create(16, "no-such-scheme")],
    ["insert: fewer values than keys", () => t.insert(u(3), u(2))],
    ["find: short value output", () => t.find(u(3), u(2), new Uint8Array(3))],
    ["find: short found output", () => t.find(u(3), u(3), new Uint8Array(2))],
    // A second call before the first is awaited.
    ["a call while another is in flight", async () => {
      const first = t.insert(u(4), u(4));
      // Caught at once, so the rejection is not reported as unhandled.
      const second = t.erase(u(4)).then(() => null, (e) => e);
      await first;
      const refused = await second;
      if (refused) throw refused;
    }],
  ];
  const checks = [];
  for (const [name, f] of cases) {
    try {
      await f();
      checks.push({ case: `WebGPU ${name}`, ok: false, message: "did not reject" });
    } catch (e) {
      const trap = e instanceof WebAssembly.RuntimeError;
      checks.push({ case: `WebGPU ${name}`, ok: e instanceof Error && !trap && e.message.length > 0, message: String(e.message ?? e) });
    }
  }
  await t.insert(new Uint32Array([7, 8]), new Uint32Array([70, 80]));
  const v = u(3), f = new Uint8Array(3);
  await t.find(new Uint32Array([8, 7, 9]), v, f);
  // Key 0 went in with the in-flight case above; 7 and 8 now.
  const usable = t.size() === 3 && v[0] === 80 && v[1] === 70 && f.join() === "1,1,0";
  checks.push({ case: "WebGPU table usable after refused calls", ok: usable, message: usable ? "" : `size ${t.size()}` });
  t.free();
  return checks;
}

async function probeWebGPU() {
  if (!("gpu" in navigator)) return { adapter: null, why: "navigator.gpu is absent (WebGPU is off in this browser)" };
  try {
    const a = await navigator.gpu.requestAdapter();
    if (!a) return { adapter: null, why: "navigator.gpu.requestAdapter() found no adapter" };
    const i = a.info ?? {};
    return { adapter: { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description } };
  } catch (e) {
    return { adapter: null, why: `requestAdapter() failed: ${e.message}` };
  }
}

// Grouped bars of Mops/s per size, drawn as inline SVG (no fetches).
function chart(rows) {
  const series = [
    ["gpuhash (wasm, CPU)", "gpuhash_mops", "#2a6fdb"],
    ["gpuhash (WebGPU)", "webgpu_mops", "#8e44ad"],
    ["Map", "map_mops", "#e07b39"],
    ["Set", "set_mops", "#3aa35b"],
  ].filter(([, k]) => rows.every((r) => typeof r[k] === "number"));
  const W = 720, H = 320, L = 56, B = 40, T = 30;
  const top = Math.max(1, ...rows.flatMap((r) => series.map(([, k]) => r[k])));
  const ns = "http://www.w3.org/2000/svg";
  const el = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  };
  const svg = el("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img" });
  svg.append(el("text", { x: L, y: 16 }, "Mixed workload throughput, million operations per second"));
  const y = (v) => H - B - (v / top) * (H - B - T);
  for (let k = 0; k <= 4; k++) {
    const v = (top * k) / 4;
    svg.append(el("line", { x1: L, x2: W - 10, y1: y(v), y2: y(v), stroke: "#ddd" }));
    svg.append(el("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, v.toFixed(1)));
  }
  const group = (W - L - 10) / Math.max(1, rows.length);
  const bar = (group * 0.8) / series.length;
  rows.forEach((r, g) => {
    series.forEach(([, key, color], s) => {
      if (typeof r[key] !== "number") return;
      const x = L + g * group + group * 0.1 + s * bar;
      svg.append(el("rect", { x, y: y(r[key]), width: bar - 2, height: H - B - y(r[key]), fill: color }));
      svg.append(el("text", { x: x + bar / 2 - 1, y: y(r[key]) - 3, "text-anchor": "middle", "font-size": 10 }, r[key].toFixed(1)));
    });
    svg.append(el("text", { x: L + g * group + group / 2, y: H - B + 16, "text-anchor": "middle" }, `${r.size.toLocaleString("en")} keys`));
  });
  series.forEach(([name, , color], s) => {
    svg.append(el("rect", { x: W - 160, y: T + s * 16, width: 10, height: 10, fill: color }));
    svg.append(el("text", { x: W - 145, y: T + s * 16 + 9 }, name));
  });
  document.getElementById("chart").replaceChildren(svg);
}

function addRow(r) {
  const tr = document.createElement("tr");
  const opt = (v) => (typeof v === "number" ? v.toFixed(2) : "—");
  const cells = [r.size.toLocaleString("en"), r.ops.toLocaleString("en"), r.gpuhash_mops.toFixed(2), opt(r.webgpu_mops),
    r.map_mops.toFixed(2), r.set_mops.toFixed(2), (r.gpuhash_mops / r.map_mops).toFixed(2) + "×", r.oracle];
  for (const c of cells) {
    const td = document.createElement("td");
    td.textContent = c;
    tr.append(td);
  }
  document.querySelector("#rows tbody").append(tr);
}

async function main() {
  const result = { status: "running", userAgent: navigator.userAgent, config: { sizes: SIZES, batch: BATCH, min_ops: MIN_OPS, inject: INJECT, scheme: SCHEME }, rows: [] };
  const publish = async () => {
    resultEl.textContent = JSON.stringify(result, null, 2);
    if (q.has("post")) await fetch("/result", { method: "POST", body: resultEl.textContent });
  };
  try {
    if (!SIZES.every((n) => Number.isInteger(n) && n > 0) || !(BATCH > 0) || !(MIN_OPS >= 0)) {
      throw new Error(`bad URL parameters: sizes=${SIZES} batch=${BATCH} ops=${MIN_OPS}`);
    }
    await init();
    result.bad_input = badInputChecks();
    if (!result.bad_input.every((c) => c.ok)) throw new Error("a bad argument was not refused with an Error: " + JSON.stringify(result.bad_input.filter((c) => !c.ok)));

    const gpu = await probeWebGPU();
    const skip = !WEBGPU ? "left out by webgpu=0" : gpu.adapter ? null : gpu.why;
    result.webgpu = skip ? { adapter: gpu.adapter, ran: false, skipped: skip } : { adapter: gpu.adapter, ran: true };
    document.getElementById("webgpu").textContent = skip ? `gpuhash on WebGPU: skipped: ${skip}.` : "gpuhash on WebGPU: running…";
    if (result.webgpu.ran) {
      const checks = await gpuBadInputChecks();
      result.bad_input.push(...checks);
      if (!checks.every((c) => c.ok)) throw new Error("a bad argument to the WebGPU table was not refused with an Error: " + JSON.stringify(checks.filter((c) => !c.ok)));
    }

    for (const [i, n] of SIZES.entries()) {
      say(`size ${n.toLocaleString("en")}: generating the workload…`);
      await breathe();
      const w = workload(n, 0x5eed + i);
      say(`size ${n.toLocaleString("en")}: gpuhash, Map, Set…`);
      await breathe();
      const g = runGpuhash(w);
      if (INJECT && w.rounds[0].look.length > 0) g.out[0].found[0] ^= 1;
      const m = runMap(w);
      const s = runSet(w);
      const bad = compare(w, g, m, s);
      const mops = (ms) => w.ops / ms / 1000;
      const row = {
        size: n, ops: w.ops, rounds: w.rounds.length, round_ops: w.roundLen, gpuhash_ms: g.ms, map_ms: m.ms, set_ms: s.ms,
        gpuhash_mops: mops(g.ms), map_mops: mops(m.ms), set_mops: mops(s.ms),
        final_len: m.map.size, oracle: bad.count === 0 ? "agree" : "mismatch", mismatches: bad.count, examples: bad.examples,
      };
      if (result.webgpu.ran) {
        say(`size ${n.toLocaleString("en")}: gpuhash on WebGPU…`);
        await breathe();
        const gw = await runWebGPU(w);
        const badw = compare(w, gw, m, null);
        result.webgpu.gpuhash_adapter = gw.adapter;
        result.webgpu.scheme = gw.scheme;
        Object.assign(row, { webgpu_ms: gw.ms, webgpu_mops: mops(gw.ms), webgpu_oracle: badw.count === 0 ? "agree" : "mismatch",
          webgpu_mismatches: badw.count, webgpu_examples: badw.examples });
        if (badw.count > 0) row.oracle = "mismatch";
        bad.count += badw.count;
        bad.examples.push(...badw.examples.map((e) => `WebGPU: ${e}`));
      }
      result.rows.push(row);
      addRow(row);
      chart(result.rows);
      if (bad.count > 0) {
        result.status = "mismatch";
        throw new Error(`gpuhash disagrees with Map at ${n} keys (${bad.count} mismatches): ${bad.examples.join("; ")}`);
      }
    }
    result.status = "ok";
    if (result.webgpu.ran) document.getElementById("webgpu").textContent = `gpuhash on WebGPU ran on ${result.webgpu.gpuhash_adapter}.`;
    statusEl.className = "ok";
    say(`done: gpuhash agreed with Map at every size (${SIZES.join(", ")} keys)`);
  } catch (e) {
    if (result.status === "running") result.status = "error";
    result.message = String(e && e.stack ? e.stack : e);
    statusEl.className = "failed";
    say(`FAILED: ${e.message ?? e}`);
  }
  await publish();
}

main();
