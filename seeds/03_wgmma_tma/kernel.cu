// seeds/03_wgmma_tma/kernel.cu: Hopper HGEMM, TMA + wgmma, warp-specialised (sm_90a).
//
// One CTA computes one BM x BN tile of C (non-persistent grid, grouped raster),
// or, with SPLIT_K > 1, one contiguous range of K for one tile (see "Split-K"),
// or, with PERSISTENT=1, loops over tiles (see "Persistent tile loop" and
// "Pingpong"). The CTA has 1 + CONSUMERS warpgroups (128 threads each):
//   * warpgroup 0, the producer: one thread issues TMA bulk-tensor loads of the
//     A and B slices (BK = 64 or 128 halfs of K: one or two 128-byte swizzle
//     rows, see "Two k-tiles a slot") into a STAGES-deep ring of shared-memory
//     buffers, 128-byte swizzled;
//   * warpgroups 1..CONSUMERS: each owns BM/CONSUMERS rows of the tile (or, in
//     pingpong, whole tiles) and issues wgmma.mma_async m64nBNk16 (fp16 in,
//     fp32 accumulators in registers) straight from the swizzled shared memory.
// Two mbarriers per ring slot synchronise them:
//   full[s]  count 1: the producer's arrive.expect_tx(stage bytes); the phase
//            completes when the TMA engine has written all the bytes.
//   empty[s] count CONSUMERS*4 (4 in pingpong: one consumer reads each slot):
//            lane 0 of every reading consumer warp arrives once the wgmmas that
//            read slot s are complete (wgmma.wait_group), so the producer may
//            refill it.
// Phase parity: the n-th use (n = kt / STAGES) of slot s waits for phase n of
// full[s], i.e. parity n & 1; the producer's n-th refill (n >= 1) waits for
// phase n-1 of empty[s], i.e. parity (n-1) & 1.
// setmaxnreg moves registers from the producer (PRODUCER_REGS) to the
// consumers (CONSUMER_REGS); the kernel is compiled with __launch_bounds__(
// threads, 1) so it has a register cap at entry, as setmaxnreg requires.
//
// Layouts (exactly one, chosen by the builder):
//   ANVIL_LAYOUT_NT: A row-major MxK, B row-major NxK, C = A * B^T
//   ANVIL_LAYOUT_NN: A row-major MxK, B row-major KxN, C = A * B
// C is row-major MxN, fp16, written with bounds-checked stores (see "Epilogue").
//
// ---- Reading order ------------------------------------------------------------
// After this description of the design, the file runs: the knobs and their named
// modes (KernelSchedule, TileScheduler, EpilogueKind, SplitReduce, PdlRelease, as
// CUTLASS 3.x names them), the illegal combinations as static_asserts with their
// hardware reason (seed.json's rules), PTX wrappers, then the kernel in CUTLASS
// 3.x's parts: the shared-memory pipeline (Ring), the tile schedulers
// (TilePerCtaWork, PersistentWork), the producer main loop (load), the consumer
// main loop (mma), the epilogue (store), the persistent schedules' consumers, the
// kernel that ties them together, and the host side (workspace, tensor maps,
// launch, anvil_gemm).
//
// ---- Shared-memory layouts and wgmma descriptors (the part to get right) ----
// Every ring slot is 1024-byte aligned (the 128B-swizzle pattern repeats every
// 8 rows x 128 bytes = 1024 bytes and both TMA and wgmma apply it on absolute
// shared-memory address bits [4:6] ^= [7:9]).
//
// A (both layouts) is K-major: TMA box {64 (K), BM (rows)} lands as BM rows of
// 128 bytes. wgmma "K-major, 128B swizzle" canonical layout (CuTe:
// Swizzle<3,4,3> o ((8,m),(T,2)):((8T,SBO),(1,T)), T = 8 halfs):
//   SBO = 1024 bytes (next group of 8 rows), LBO unused (encoded 1),
//   the k16 step kk inside the 64-wide slice starts kk*32 bytes further in
//   (the swizzle is applied by the hardware on the final address, which is why
//   advancing the start address by 32 bytes inside a swizzle atom is legal; it is
//   what CUTLASS's descriptor iterator and the fast.cu kernels do).
//   The m64 sub-tile of consumer c, m-tile mt starts (c*BM/CONSUMERS + mt*64)
//   rows = multiples of 8 KiB further.
//
// B in NT (B row-major N x K) is K-major too: box {64 (K), BN (rows)}, same
//   descriptor as A, instruction transpose-B bit = 0.
//
// B in NN (B row-major K x N) is MN-major ("N-major"): along a row of B the N
//   index is contiguous. wgmma reads MN-major B when the transpose-B immediate is
//   1 (only for 16-bit types). The 128B-swizzle MN-major canonical layout is
//   (CuTe mma_traits_sm90_gmma.hpp, in 16-byte units):
//       Swizzle<3,4,3> o ((8,n),(8,k)) : ((1,LBO),(8,SBO))
//   i.e. an atom is 64 N-elements (128 bytes) x 8 K-rows, each K-row 128 bytes
//   apart; successive 64-wide N blocks are LBO apart, successive 8-row K groups
//   SBO apart. A TMA box of {64 (N), 64 (K)} with 128B swizzle writes exactly
//   64 K-rows of 128 bytes = 8 atoms stacked along K, 1024 bytes apart. We load
//   BN/64 such boxes per stage, box j at byte offset j*8192 (= 64 rows x 128 B).
//   Hence: SBO = 1024 (next 8 K-rows), LBO = 8192 (next 64 N-columns), and the
//   k16 step kk starts kk*16 rows = kk*2048 bytes further (still 1024-aligned,
//   so the descriptor's base-offset field stays 0). The inner box dimension is
//   limited to 128 bytes under 128B swizzle, which is why NN needs BN % 64 == 0
//   and several boxes per stage.
//
// ---- Two k-tiles a slot (ANVIL_BK = 128) ---------------------------------------
// A ring slot holds BK = 128 halfs of K instead of 64, so the producer's
// arrive/wait round trip, the consumers' full-barrier wait and slot release are
// paid once per 128 of K. (Measured with bench/tma_read.cu on the H100: a CTA's
// TMA stream costs ~0.15 µs per slot plus ~0.15 µs per 64-wide k-tile's boxes,
// whatever the bytes; 0.30 µs per k-tile at one a slot, 0.22 at two.)
// A swizzle row is still 128 bytes, so a K-major operand (A, NT's B) is loaded
// as two boxes {64 (K), rows} at k and k + 64 into two sub-tiles of the slot,
// rows x 128 bytes each, the second at rows * 128 bytes (a multiple of 1024).
// That is CuTe's K-major SW128 atom tiled over (rows, 128) with the row atoms
// first, so the k16 step kk (0..7) starts in sub-tile kk / 4, (kk % 4) * 32
// bytes in; SBO and LBO as above. NN's MN-major B is one box {64 (N), 128 (K)}
// per 64 columns, 128 K-rows of 128 bytes (16 KiB) stacked along K: the k16
// step kk still starts kk * 2048 bytes in, and LBO (next 64 N-columns) is the
// box's 16384 bytes. layout_check.cu checks both against CuTe.
// K tails: a box that starts past K is all TMA zero fill (its bytes still
// count in complete_tx) and adds nothing.
//
// ---- Tails and alignment ----------------------------------------------------
// M/N/K tails: TMA fills out-of-bounds box elements with zeros (and still counts
// the full box in complete_tx), so partial tiles need no special load path;
// zeros past K add nothing, rows/cols past M/N are never stored.
// TMA needs 16-byte global row strides: K % 8 == 0 for A (and NT's B), N % 8 == 0
// for NN's B. Otherwise anvil_gemm first copies the offending operand into the
// workspace with rows padded to a multiple of 8 halfs, padding zeroed (one small
// kernel per padded operand, same stream); the tensor map still declares the true
// extent, so the padding is never even read. anvil_workspace_bytes returns the
// padded sizes for such shapes (plus the split-K partials, below) and 0 otherwise.
//
// ---- Split-K (ANVIL_SPLIT_K > 1) -----------------------------------------------
// For shapes with few BM x BN tiles and a long K (e.g. 256x64x12288: 2 tiles for
// 132 SMs). The host launches grid (tiles, splits), splits = min(SPLIT_K, k_tiles):
//   * blockIdx.x is the tile, through the same grouped raster as without split-K;
//     blockIdx.y is the split: the slowest-varying launch index, so the CTAs
//     resident together are mostly one split (one k-range) of neighbouring tiles,
//     sharing A/B panels in L2 as the raster intends.
//   * split s owns k-tiles [s*k_tiles/splits, (s+1)*k_tiles/splits): contiguous,
//     balanced to within one k-tile, never empty (splits <= k_tiles; an empty
//     range would still store its zero accumulators, so the reduce never reads
//     unwritten memory). The ring's slot/phase bookkeeping runs on the local
//     index i = kt - kt_begin; only the TMA coordinates use the global kt.
//   * each split stores its fp32 accumulators (float2 pairs where N is even,
//     bounds-checked like the fp16 epilogue) into its own slab of the workspace:
//     partials[s * slab + row * N + col], slab = M*N rounded up to 64 floats
//     (256 bytes). Every in-bounds element of every slab is written on every call,
//     so the workspace may hold anything beforehand; no zeroing, no atomics.
//   * a second kernel on the same stream, splitk_reduce, sums the slabs in the
//     fixed order s = 0..splits-1 (deterministic: no atomics, no race on order)
//     over the flat index i < M*N (partials and C share ld = N), float4 loads,
//     8-byte stores of 4 halfs when C is 8-byte aligned, a scalar tail for the
//     last M*N % 4 elements.
// With one effective split (SPLIT_K == 1, or K <= BK) the kernel stores fp16 C
// directly and nothing else is launched; the SPLIT_K == 1 build compiles to the
// same code as before split-K existed (if constexpr / #if).
// Workspace: [padded A][padded B][partials], each 256-byte aligned;
// anvil_workspace_bytes adds splits * slab * 4 bytes when splits > 1, and
// anvil_gemm returns 5 if the workspace is then null or not 16-byte aligned.
//
// ---- Split-K summed in a cluster (ANVIL_SPLIT_REDUCE=1) -------------------------
// The second kernel and the slabs cost a launch, splits * M*N * 4 bytes written and
// read back, and (device time being the sum of the kernels) the reduce's own time.
// With SPLIT_REDUCE=1 the splits of one tile run as one thread-block cluster of
// dims (1, splits, 1) (grid.y = splits, so cluster rank = blockIdx.y = the split)
// and sum their partials through distributed shared memory instead:
//   1. after its main loop each CTA's consumers wait for each other (bar.sync 1:
//      the ring is drained, as for EPILOGUE=1) and store their fp32 accumulators
//      into the CTA's own ring as a BM x (BN+8) row-major tile (pitch BN+8 floats:
//      a warp's 8 rows x 4 lanes of 8-byte stores take the minimum 2 wavefronts);
//   2. barrier.cluster (arrive.release / wait.acquire, every thread of every CTA):
//      all partial tiles are written and visible to the cluster;
//   3. split r sums the float4 groups [r*G/splits, (r+1)*G/splits) of the tile
//      (G = BM*BN/4, row-major), reading the group from every CTA of the cluster
//      with ld.shared::cluster (mapa) in the fixed order 0..splits-1, so the result
//      is deterministic and independent of timing; it converts to fp16 and stores
//      4 halfs (one 8-byte store when N % 4 == 0 and C is 8-byte aligned, else
//      bounds-checked scalars), consecutive threads along a row;
//   4. barrier.cluster again: no CTA exits (its shared memory goes away) while a
//      peer may still read it.
// No partials in the workspace, nothing else launched. Clusters above 8 CTAs are
// "non-portable" (allowed on H100 up to 16, set once per process); a shape whose
// cluster cannot be scheduled fails the launch (anvil_gemm returns 1). Needs
// CLUSTER 1 and PERSISTENT 0, and BM*(BN+8)*4 bytes of ring (seed.json rules).
//
// ---- Epilogue (ANVIL_EPILOGUE) ------------------------------------------------
// EPILOGUE=0: each consumer thread stores its accumulator fragment directly,
//   half2 pairs over 8 rows per warp (uncoalesced: 32-byte sectors half used).
// EPILOGUE=1: the fp16 tile is staged in shared memory and written coalesced:
//   1. bar.sync 1, 128*CONSUMERS (consumer threads only; the producer may have
//      left its loop). The ring is free then: the producer issues exactly n_kt
//      loads, every one was waited on by every consumer through full[s], so all
//      have landed, and each consumer's wgmma_wait<0> retired its ring reads.
//   2. each consumer converts its accumulators to fp16 and st.shared's the half2
//      pairs into its own kWgRows rows of the ring, from sA0 + c*kWgRows*pitch,
//      pitch = BN + 8 halfs (rows start 4 banks apart: the 8 rows x 4 lanes of a
//      warp's 4-byte stores hit 32 distinct banks; rows stay 16-byte aligned).
//   3. bar.sync 2+c, 128 (this warpgroup only), then its 128 threads copy the rows
//      out, 16 bytes (8 halfs) per thread per step, consecutive threads along a row;
//      rows >= M and chunks starting at col >= N are skipped; a chunk is one
//      16-byte store when N % 8 == 0, C is 16-byte aligned and col + 8 <= N, else
//      8 bounds-checked 2-byte stores.
//   The staging needs BM*(BN+8)*2 bytes <= the ring (static_assert and seed.json
//   rule); no extra shared memory. The fp32 split-K partials keep direct stores.
//   With PERSISTENT=1 the ring is being refilled for the next tile, so each
//   consumer stages in its own kWgRows x (BN+8)-half buffer after the mbarriers
//   (extra shared memory, in the seed.json rule) and step 1 is not needed; a
//   barrier of its warpgroup before step 2 waits until the previous tile's
//   copy-out has read the buffer.
// EPILOGUE=2: staged as for 1, then written by the TMA unit (cp.async.bulk.tensor
//   store) instead of the threads:
//   1. as for EPILOGUE=1 (the ring is drained; persistent: own buffers, placed
//      1024-byte aligned right after the B slots, the mbarriers after them).
//   2. each consumer st.shared's its fp16 pairs into boxes of kWgRows rows x W
//      columns, W the widest of 64, 32, 16 dividing BN (rows of 128, 64 or 32
//      bytes), box b at stage + b*kWgRows*2W, with the TMA swizzle of the row's
//      width: a row's 16-byte chunk index is XORed with its 128-byte line index
//      modulo the chunks per row. A warp's 8 rows x 4 lanes of 4-byte stores then
//      hit 32 distinct banks.
//   3. every thread fences its stores to the async proxy (fence.proxy.async),
//      bar.sync 2+c, 128; thread 0 of the warpgroup issues one TMA store per box
//      inside N ({W cols, kWgRows rows} at (n0 + W*b, row0)) and commits them as
//      one bulk group. The TMA clips rows >= M and cols >= N: no bounds checks.
//   4. before the warpgroup writes the buffer again (persistent) and before it
//      exits, thread 0 waits until its bulk groups have read the buffer
//      (wait_group.read, as CUTLASS's tma_store_wait); the kernel's completion
//      covers their global writes.
//   C's tensor map needs 16-byte rows and base (N % 8 == 0, C 16-byte aligned);
//   otherwise the call passes c_tma = 0 and the kernel stores the fragments
//   directly (as EPILOGUE=0). The consumer threads are free as soon as the box
//   stores are issued: with PERSISTENT=1 the next tile's main loop overlaps the
//   TMA's writes of this one. Pingpong stages 64 rows at a time in one buffer
//   shared by both consumers (steps 2-4 once per m64 slab; see "Pingpong").
//
// ---- Swapped operands (ANVIL_SWAP_AB=1, NT only) ----------------------------------
// C = A B^T equals (B A^T)^T, and in NT both B (N x K) and A (M x K) are K-major, so
// anvil_gemm swaps A with B and M with N and runs the same kernel on the N x M
// product: the short side of a decode-sized call (M = 16 tokens) becomes the wgmma N
// side, where a tile can be 16 wide, instead of filling 48 of a 64-row A box with
// TMA zero fill. The kernel's (row, col) is then C's (col, row): store_pair and
// store_pair_f32 write C[col * M' + row] one element at a time (M' = the kernel's M
// = C's N), and the split-K slabs are kept in C's layout, so splitk_reduce is the
// same. EPILOGUE 0 only (the staged epilogues copy rows out), no SPLIT_REDUCE, no
// CLUSTER (rules and static_assert).
//
// ---- Multicast clusters (ANVIL_CLUSTER = 2 or 4) ------------------------------------
// The CLUSTER CTAs of a cluster compute vertically adjacent tiles (same B columns);
// each TMA-loads its share of every B stage and multicasts it into all of them
// (the full barrier of each CTA counts the whole stage), and every consumer warp
// releases a slot use on the empty barrier of every CTA of the cluster, so
// empty[s] counts CONSUMERS*4*CLUSTER arrivals and no CTA refills a slot that a
// peer still reads.
//   Start: thread 0 initialises the mbarriers and fences them to the cluster
//   (fence.mbarrier_init.release.cluster); then every thread of the cluster
//   passes barrier.cluster with a relaxed arrive and an acquiring wait, so no peer
//   multicasts into, or arrives on, barriers not yet initialised.
//   Cluster exit: a CTA's shared memory must outlive every peer's multicast into
//   it and every peer's arrival on its empty barriers. The consumers release the
//   last use of each slot too (after their final wgmma_wait<0>), and the producer
//   thread, after its last load, waits for the empty phase of the last use of
//   every slot (CUTLASS's load tail): those phases complete only once every
//   consumer warp of the cluster has arrived on this CTA's barriers, after its
//   reads of the multicast data. The CTA's other threads may leave earlier; its
//   shared memory lives until the last one exits. No cluster barrier at the exit:
//   barrier.cluster.arrive.release compiles to a GPU-scope MEMBAR, and the start
//   (release) and exit barriers cost a near-empty kernel of 112 CTAs 0.7 and
//   0.65 µs on the H100 (bench/cluster_cost.cu), against 0.07 for the relaxed
//   start.
//
// ---- Early fill (tile-per-CTA grid) ---------------------------------------------------
// The tensor-map prefetch is the kernel's first instruction. Without persistence,
// thread 0 then initialises the ring's barriers and, before the CTA (or cluster)
// barrier, issues the first stage itself, after its own griddepcontrol.wait (the
// operands may be the previous kernel's output): the barrier it arrives on and
// the TMA completes on is its own, initialised and fenced to the async proxy by
// the same thread, and the other threads pass the CTA barrier before they touch
// the ring. In a multicast cluster the B share lands in the peers' barriers, so
// only the stage's A goes early and its B follows the cluster barrier; with
// CLUSTER_N > 1 A is multicast too and nothing goes early. The first k-tile was
// issued ~0.2-0.3 us after the ring's initialisation (the barrier, setmaxnreg, the
// producer loop's start) and is on the critical path of every short kernel: on
// the H100 this took 2-4% off 64x4096x256, 512x2048x512, 256x64x12288 and 1000^3
// (bench/NOTES.md, 2026-11-22 "The first stage before the CTA barrier"). Issuing the whole first fill early was slower: a
// stage takes thread 0 ~0.1 us to issue, and the consumers wait at the barrier.
//
// ---- Shape specialisation (ANVIL_SHAPE_M/N/K) ----------------------------------------
// A configuration built for one problem: the kernel reads M, N, K and the tile
// counts as constants instead of its arguments, so nvcc folds the k-loop's trip
// count (fully unrolled for short K), the tile raster's divisions and the tail
// checks (gone where the tile divides the shape). anvil_gemm returns 7 for any
// other shape (the caller's M, N, K; with SWAP_AB the kernel's are swapped).
// 0 leaves a dimension free; the search's specialise stage sets all three.
//
// ---- Persistent tile loop (ANVIL_PERSISTENT=1) ----------------------------------
// The host launches min(tiles, SMs) CTAs (the SM count of the current device is
// queried once, function-local static); CTA b processes the tiles
// t = b, b + gridDim.x, b + 2*gridDim.x, ... < tiles_m*tiles_n, each mapped to
// (m0, n0) by the same grouped raster as the non-persistent grid (so the tiles in
// flight at any moment are ~gridDim.x consecutive raster positions). Barrier init,
// tensor-map prefetch and the pipeline fill are paid once per CTA, and the producer
// keeps loading the next tile's k-tiles into the ring while the consumers store
// the current tile (direct stores, or staged in the consumers' own buffers).
// With CLUSTER c > 1 the unit is a group of c vertically adjacent tiles: the host
// launches as many clusters as the device holds at once (cudaOccupancyMax-
// ActiveClusters, queried once), and the c CTAs of a cluster walk the same groups
// in the same order, rank r computing rows m0 + r*BM, so every ring position holds
// the same k-tile in all of them and the B multicast and the cross-CTA slot
// release work as without persistence; the start and the exit are as below
// ("Multicast clusters").
// Ring bookkeeping runs on g, the CTA's running k-iteration count over all its
// tiles (never reset per tile), identically in the producer and the consumers:
//   slot s = g % STAGES, use n = g / STAGES (kept incrementally as (s, parity of
//   n), so nothing overflows or divides);
//   producer: for n >= 1 waits empty[s] parity (n-1) & 1 (phase n-1 of empty[s]
//     completes when all CONSUMERS*4 consumer warps released use n-1), then
//     arrive.expect_tx(full[s]) + the TMA loads of use n;
//   consumers: wait full[s] parity n & 1 (phase n of full[s] completes when the
//     bytes of use n have landed), issue the wgmmas, and release use n of slot s
//     (lane 0 of each consumer warp arrives once on empty[s]) exactly once:
//     at the next k-iteration of the same tile after wgmma_wait<1> (as today), or,
//     for the tile's last k-tile, after the wgmma_wait<0> that ends the tile,
//     before the epilogue. So phase n of empty[s] gets exactly CONSUMERS*4
//     arrivals, all for use n: a consumer arrives for use n only after phase n of
//     full[s] completed, which needs the producer's loads of use n, which it issued
//     only after phase n-1 of empty[s] had completed.
//   Then the accumulators are zeroed and the next tile starts. The producer thread
//   exits after issuing its last load (as without persistence) and, with clusters,
//   after the final empty phases (below).
// PERSISTENT=1 requires SPLIT_K == 1 (no (tile, split) work units): static_assert
// and seed.json rule.
//
// ---- Stream-K (ANVIL_PERSISTENT=2) ------------------------------------------------
// The same persistent CTAs and ring, over (tile, k-tile) units. With at least two
// waves of tiles, the first waves (all but the last one or two) are whole tiles
// dealt round-robin as with PERSISTENT=1; the units of the remaining tiles (all
// of them with fewer than two waves) are shared evenly: CTA b owns
// [b*U/G, (b+1)*U/G) of the U units, tile-major, G = gridDim.x = min(SMs, all
// units). A CTA's range is a run of segments, one per tile it touches:
//   * a segment that starts inside a tile (only a CTA's first can) stores its fp32
//     accumulators as the CTA's partial tile in the workspace (quad q of consumer
//     thread ct at q*threads + ct: coalesced, read back by the same thread index),
//     then __threadfence, a consumer barrier and st.release.gpu of the CTA's flag;
//   * the segment holding a tile's first k-tile belongs to the tile's owner; if it
//     ends inside the tile, the owner acquires (ld.acquire.gpu) the flag of every
//     later CTA whose range starts inside the tile and adds their partials, in CTA
//     order (deterministic), then stores the tile as any other. The owner reaches
//     that tile at the end of its range, the later CTAs at the start of theirs.
// Waiting on another CTA needs every CTA resident at once: one CTA per SM (launch
// bounds 1, the ring fills the SM) and G <= SMs, as CUTLASS's stream-K assumes.
// The host zeroes the G flags with a memset in every call (no state is carried in
// the workspace from call to call). The producer walks the units with counters,
// no division per unit.
//
// ---- Column-split consumers (ANVIL_SPLIT_COLS=1, CONSUMERS=2) ---------------------
// Cooperative consumers split the tile's rows, so a 64-row tile has one consumer
// warpgroup, and one warpgroup's chain of wgmmas leaves the tensor cores idle
// between its batches (a barrier wait, the commit and wait_group). With
// SPLIT_COLS=1 both consumers take all BM rows (64 or 128) and consumer c the
// columns c*BN/2.. of the tile: each issues m64 x (BN/2) x k16 wgmmas on the
// same A rows and its half of the B slice (NT: B rows c*BN/2.., whole 8-row
// atoms, so the descriptor starts c*BN/2*128 bytes further; NN: the boxes from
// c*BN/128 on, so BN % 128 == 0). Ring, producer and slot release are as for
// the row split (both consumers read every slot); the epilogues and the split-K
// partials store each consumer's BM x BN/2 part at its column origin (staging
// pitch BN/2 + 8; EPILOGUE=2 needs BN/2 in whole 16-column boxes). A 64x144
// tile, cuBLASLt's for 1000^3, then runs two warpgroups of m64n72.
//
// ---- Pingpong (ANVIL_SCHEDULE=1, with PERSISTENT=1 and CONSUMERS=2) --------------
// Cooperative consumers (SCHEDULE=0) split every tile and store it together, so
// the tensor cores idle during the epilogue. In pingpong (CUTLASS's
// KernelTmaWarpSpecializedPingpong) consumer c computes whole BM x BN tiles: the
// CTA's local tiles i = c, c + 2, ... The producer is unchanged: it loads every
// local tile's k-tiles in order, so tile i occupies the running ring positions
// [i * k_tiles, (i + 1) * k_tiles), and consumer c starts tile i from slot
// (i * k_tiles) % STAGES, parity (i * k_tiles / STAGES) & 1. The consumers take
// turns through the main loop with two named barriers (id 4 + c = "c's turn",
// 256 threads: the waiter's bar.sync plus the other's bar.arrive): before tile
// i > 0 consumer c waits for its turn; once tile i's last wgmmas are issued it
// hands the turn over if tile i + 1 exists (so every sync has exactly one
// arrive). Its epilogue then runs under the other consumer's wgmmas. The turns
// also keep the parity waits exact: a consumer starts waiting on tile i's
// positions only after every earlier position was waited on, so no slot is ever
// a full phase ahead of its waiter; and each slot use is read and released by one
// consumer, hence empty[s] counts 4 arrivals.
// A consumer holds a whole tile's accumulators: up to 192 per thread (128x192),
// which ptxas allocates within the consumers' setmaxnreg count (see the rule).
// With EPILOGUE=2 the consumers share one staging buffer of one m64 slab
// (64 x BN halfs): an epilogue stages and TMA-stores its tile slab by slab,
// waiting (wait_group.read) for each slab's stores to have read the buffer before
// writing the next. The epilogues of tiles i and i + 1 are the two consumers',
// one after the other, so tile i > 0's epilogue first waits on named barrier
// 6 + c (160 threads: its 128 and warp 0 of the other consumer), which the other
// consumer's warp 0 arrives on once its thread 0 has seen tile i - 1's last
// stores read the buffer. These waits run under the other consumer's main loop;
// the shared memory saved buys ring stages (128x192: 5 instead of 3).
//
// Knobs (seed.json has the ranges and the hardware reason for each rule):
//   ANVIL_BM            CTA tile rows: 64*CONSUMERS or 128*CONSUMERS (each consumer
//                       owns BM/CONSUMERS rows = 1 or 2 m64 wgmma tiles); pingpong:
//                       64 or 128 (each consumer owns whole tiles)
//   ANVIL_BN            CTA tile cols = wgmma N: multiple of 16, 16..256
//                       (NN: multiple of 64)
//   ANVIL_BK            K per ring slot: 64 (one 128-byte swizzle row of fp16) or
//                       128 (two; see "Two k-tiles a slot")
//   ANVIL_STAGES        ring depth, 2..16, limited by 227 KiB of shared memory
//   ANVIL_CONSUMERS     consumer warpgroups, 1 or 2
//   ANVIL_SPLIT_COLS    ConsumerSplit: 0 Rows: two consumers split the tile's
//                       rows; 1 Columns: its columns (see "Column-split consumers")
//   ANVIL_GROUP_M       tile raster: GROUP_M tile-rows are swept together (L2 reuse)
//   ANVIL_PRODUCER_REGS setmaxnreg for the producer warpgroup (24..56)
//   ANVIL_CONSUMER_REGS setmaxnreg for the consumer warpgroups (multiple of 8)
//   ANVIL_SPLIT_K       K splits per tile (1 = off): 1..32; > 1 adds an
//                       fp32 partials workspace and a reduce kernel, or
//   ANVIL_SPLIT_REDUCE  SplitReduce: 0 Workspace (slabs + reduce kernel); 1 Cluster:
//                       the splits of a tile sum in a cluster through distributed
//                       shared memory (no workspace, one kernel)
//   ANVIL_EPILOGUE      EpilogueKind: 0 Direct (fragment stores of C); 1 StagedStores
//                       (smem-staged 16-byte stores); 2 TmaStore (smem-staged TMA stores)
//   ANVIL_PERSISTENT    TileScheduler: 0 TilePerCta (one CTA per tile x split);
//                       1 Persistent (min(tiles, SMs) CTAs loop over the tiles,
//                       SPLIT_K 1 only); 2 StreamK (above)
//   ANVIL_SCHEDULE      KernelSchedule: 0 KernelTmaWarpSpecializedCooperative;
//                       1 KernelTmaWarpSpecializedPingpong (PERSISTENT 1, CONSUMERS 2)
//   ANVIL_CLUSTER       1, or 2 or 4: clusters of CTAs along M share the B tile
//                       through TMA multicast (not with stream-K; see below)
//   ANVIL_SWAP_AB       1: computes C^T = B A^T (NT only; see below), so a short M
//                       becomes the wgmma N side (tiles as narrow as 16)
//   ANVIL_PDL           PdlRelease: launched as programmatic dependents (see below),
//                       the next kernel let in at CTA start (1 AtCtaStart) or after the
//                       last load (2 AfterLastLoad); 0 Off: plain stream order
//   ANVIL_SHAPE_M/N/K   0: any shape; otherwise the problem's M, N, K fixed at
//                       compile time (see "Shape specialisation")
// BN must be a plain integer literal (it is token-pasted into the CuTe wgmma atom
// name, e.g. -DANVIL_BN=256 -> MMA_64x256x16_F32F16F16_SS).

#include <cuda.h>  // CUtensorMap and the cuTensorMapEncodeTiled types only; no -lcuda
#include <cudaTypedefs.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <utility>

#if defined(ANVIL_LAYOUT_NT) && defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif
#if !defined(ANVIL_LAYOUT_NT) && !defined(ANVIL_LAYOUT_NN)
#error "define exactly one of ANVIL_LAYOUT_NT / ANVIL_LAYOUT_NN"
#endif

#ifndef ANVIL_BM
#define ANVIL_BM 128
#endif
#ifndef ANVIL_BN
#define ANVIL_BN 256
#endif
#ifndef ANVIL_BK
#define ANVIL_BK 64
#endif
#ifndef ANVIL_STAGES
#define ANVIL_STAGES 4
#endif
#ifndef ANVIL_CONSUMERS
#define ANVIL_CONSUMERS 2
#endif
#ifndef ANVIL_GROUP_M
#define ANVIL_GROUP_M 8
#endif
#ifndef ANVIL_PRODUCER_REGS
#define ANVIL_PRODUCER_REGS 40
#endif
#ifndef ANVIL_CONSUMER_REGS
#define ANVIL_CONSUMER_REGS 232
#endif
#ifndef ANVIL_SPLIT_K
#define ANVIL_SPLIT_K 1
#endif
#ifndef ANVIL_EPILOGUE
#define ANVIL_EPILOGUE 0
#endif
#ifndef ANVIL_PERSISTENT
#define ANVIL_PERSISTENT 0
#endif
#ifndef ANVIL_SCHEDULE
#define ANVIL_SCHEDULE 0
#endif
#ifndef ANVIL_PDL
#define ANVIL_PDL 2
#endif
#ifndef ANVIL_CLUSTER
#define ANVIL_CLUSTER 1
#endif
#ifndef ANVIL_CLUSTER_N
#define ANVIL_CLUSTER_N 1
#endif
#ifndef ANVIL_SPLIT_REDUCE
#define ANVIL_SPLIT_REDUCE 0
#endif
#ifndef ANVIL_SWAP_AB
#define ANVIL_SWAP_AB 0
#endif
#ifndef ANVIL_SHAPE_M
#define ANVIL_SHAPE_M 0
#endif
#ifndef ANVIL_SHAPE_N
#define ANVIL_SHAPE_N 0
#endif
#ifndef ANVIL_SHAPE_K
#define ANVIL_SHAPE_K 0
#endif

#ifndef ANVIL_SPLIT_COLS
#define ANVIL_SPLIT_COLS 0
#endif

// The values of the mode knobs, by name (the builder and the stored candidates
// pass the integers: -DANVIL_PERSISTENT=2 is the stream-K tile scheduler). The
// preprocessor needs them as macros where a mode removes code (the persistent
// kernel body, the reduce kernel); the kernel reads them as the enums below.
#define ANVIL_SCHEDULER_TILE_PER_CTA 0  // ANVIL_PERSISTENT: one CTA per output tile
#define ANVIL_SCHEDULER_PERSISTENT 1    // a persistent CTA per SM loops over tiles
#define ANVIL_SCHEDULER_STREAM_K 2      // persistent CTAs share (tile, k-tile) units
#define ANVIL_SPLIT_REDUCE_WORKSPACE 0  // ANVIL_SPLIT_REDUCE: slabs + a reduce kernel
#define ANVIL_SPLIT_REDUCE_CLUSTER 1    // the splits sum in a cluster (DSMEM)

// ANVIL_WG_N: the wgmma N of one consumer, BN or (SPLIT_COLS=1) BN/2, as a
// literal: it is token-pasted into the CuTe atom's name.
#if ANVIL_SPLIT_COLS
#if ANVIL_BN == 32
#define ANVIL_WG_N 16
#elif ANVIL_BN == 48
#define ANVIL_WG_N 24
#elif ANVIL_BN == 64
#define ANVIL_WG_N 32
#elif ANVIL_BN == 80
#define ANVIL_WG_N 40
#elif ANVIL_BN == 96
#define ANVIL_WG_N 48
#elif ANVIL_BN == 112
#define ANVIL_WG_N 56
#elif ANVIL_BN == 128
#define ANVIL_WG_N 64
#elif ANVIL_BN == 144
#define ANVIL_WG_N 72
#elif ANVIL_BN == 160
#define ANVIL_WG_N 80
#elif ANVIL_BN == 176
#define ANVIL_WG_N 88
#elif ANVIL_BN == 192
#define ANVIL_WG_N 96
#elif ANVIL_BN == 208
#define ANVIL_WG_N 104
#elif ANVIL_BN == 224
#define ANVIL_WG_N 112
#elif ANVIL_BN == 240
#define ANVIL_WG_N 120
#elif ANVIL_BN == 256
#define ANVIL_WG_N 128
#else
#error "SPLIT_COLS=1: BN must be a multiple of 16 in 32..256"
#endif
#else
#define ANVIL_WG_N ANVIL_BN
#endif

// CuTe's wgmma atoms: N in {8,16,32,64,96,128,192,256} are in the base header; the
// other multiples of 8 need its extended-shape header (much larger: only when used).
#if ANVIL_WG_N != 16 && ANVIL_WG_N != 32 && ANVIL_WG_N != 64 && ANVIL_WG_N != 96 && \
    ANVIL_WG_N != 128 && ANVIL_WG_N != 192 && ANVIL_WG_N != 256
#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED 1
#endif
#include <cute/arch/mma_sm90_gmma.hpp>  // wgmma atoms (raw PTX wrappers)

namespace {

namespace gmma = cute::SM90::GMMA;

#if defined(ANVIL_LAYOUT_NT)
constexpr bool kNT = true;
#else
constexpr bool kNT = false;
#endif

// ---- Named modes ----------------------------------------------------------------
// Each mode knob as CUTLASS 3.x names the same choice; the integer is the knob's
// value (seed.json "names" lists the same names).

// ANVIL_SCHEDULE: how the consumer warpgroups share the work (CUTLASS's kernel
// schedule tags).
enum class KernelSchedule : int {
  // Every consumer works on every tile, BM/CONSUMERS rows (or BN/2 columns) each.
  KernelTmaWarpSpecializedCooperative = 0,
  // Each consumer computes whole tiles, alternate tiles, taking turns through the
  // main loop so one consumer's epilogue runs under the other's wgmmas.
  KernelTmaWarpSpecializedPingpong = 1,
};
// ANVIL_PERSISTENT: which tiles a CTA computes (CUTLASS's tile schedulers).
enum class TileScheduler : int {
  TilePerCta = ANVIL_SCHEDULER_TILE_PER_CTA,  // grid of tiles (x K splits), one each
  Persistent = ANVIL_SCHEDULER_PERSISTENT,    // PersistentTileSchedulerSm90
  StreamK = ANVIL_SCHEDULER_STREAM_K,         // PersistentTileSchedulerSm90StreamK
};
// ANVIL_EPILOGUE: how the fp16 C tile is stored (the collective epilogue).
enum class EpilogueKind : int {
  Direct = 0,        // from the accumulator fragments (CUTLASS's DefaultEpilogue)
  StagedStores = 1,  // staged in shared memory, 16-byte coalesced thread stores
  TmaStore = 2,      // staged in swizzled boxes, cp.async.bulk.tensor stores
                     // (CUTLASS's TMA warp-specialised epilogue)
};
// ANVIL_SPLIT_REDUCE: how the K splits of a tile are summed (SPLIT_K > 1).
enum class SplitReduce : int {
  Workspace = ANVIL_SPLIT_REDUCE_WORKSPACE,  // fp32 slabs, then splitk_reduce
  Cluster = ANVIL_SPLIT_REDUCE_CLUSTER,      // one cluster per tile, summed in DSMEM
};
// ANVIL_SPLIT_COLS: how two cooperative consumers split the tile.
enum class ConsumerSplit : int { Rows = 0, Columns = 1 };
// ANVIL_PDL: when the call's last kernel lets the next kernel on the stream in.
enum class PdlRelease : int {
  Off = 0,            // plain stream order, no programmatic dependent launch
  AtCtaStart = 1,     // once every CTA has started
  AfterLastLoad = 2,  // once every CTA's producer has issued its last load
};

constexpr int kBM = ANVIL_BM;
constexpr int kBN = ANVIL_BN;
constexpr int kBK = ANVIL_BK;
constexpr int kStages = ANVIL_STAGES;
constexpr int kConsumers = ANVIL_CONSUMERS;
constexpr int kGroupM = ANVIL_GROUP_M;
constexpr int kProducerRegs = ANVIL_PRODUCER_REGS;
constexpr int kConsumerRegs = ANVIL_CONSUMER_REGS;
constexpr int kSplitK = ANVIL_SPLIT_K;
constexpr KernelSchedule kSchedule = static_cast<KernelSchedule>(ANVIL_SCHEDULE);
constexpr TileScheduler kScheduler = static_cast<TileScheduler>(ANVIL_PERSISTENT);
constexpr EpilogueKind kEpilogue = static_cast<EpilogueKind>(ANVIL_EPILOGUE);
constexpr SplitReduce kSplitReduce = static_cast<SplitReduce>(ANVIL_SPLIT_REDUCE);
constexpr ConsumerSplit kConsumerSplit = static_cast<ConsumerSplit>(ANVIL_SPLIT_COLS);
constexpr PdlRelease kPdlMode = static_cast<PdlRelease>(ANVIL_PDL);
// Shorthands the code below reads.
constexpr bool kPersistent = kScheduler != TileScheduler::TilePerCta;  // a tile loop
constexpr bool kStreamK = kScheduler == TileScheduler::StreamK;
constexpr bool kPingpong = kSchedule == KernelSchedule::KernelTmaWarpSpecializedPingpong;
constexpr bool kDirectEpilogue = kEpilogue == EpilogueKind::Direct;
constexpr bool kStagedEpilogue = kEpilogue == EpilogueKind::StagedStores;
constexpr bool kTmaEpilogue = kEpilogue == EpilogueKind::TmaStore;
constexpr bool kPdl = kPdlMode != PdlRelease::Off;
constexpr int kCluster = ANVIL_CLUSTER;      // cluster CTAs along M: they share B
constexpr int kClusterN = ANVIL_CLUSTER_N;   // cluster CTAs along N: they share A
constexpr int kClusterSize = kCluster * kClusterN;
constexpr bool kClusterReduce = kSplitReduce == SplitReduce::Cluster;
constexpr bool kSwapAB = ANVIL_SWAP_AB == 1;
// SHAPE_M/N/K: the caller's problem (0 = any), and the kernel's view of it
// (SWAP_AB runs the N x M problem).
constexpr int kShapeM = ANVIL_SHAPE_M;
constexpr int kShapeN = ANVIL_SHAPE_N;
constexpr int kShapeK = ANVIL_SHAPE_K;
constexpr int kFixM = kSwapAB ? kShapeN : kShapeM;
constexpr int kFixN = kSwapAB ? kShapeM : kShapeN;

constexpr int kThreads = 128 * (kConsumers + 1);
// Rows of a tile each consumer computes: its share of the CTA tile (cooperative),
// or the whole tile (pingpong: the consumers take alternate tiles).
constexpr bool kSplitCols = kConsumerSplit == ConsumerSplit::Columns;
constexpr int kWgRows = kPingpong || kSplitCols ? kBM : kBM / kConsumers;
// Columns of a tile each consumer computes: all of them, or (SPLIT_COLS=1) its half.
constexpr int kWgCols = ANVIL_WG_N;
constexpr int kSlotReaders = kPingpong ? 1 : kConsumers;  // warpgroups reading each slot
constexpr int kMTiles = kWgRows / 64;      // m64 wgmma tiles per consumer
constexpr int kAcc = kWgCols / 2;          // fp32 accumulators per thread per m64 tile


constexpr int kRowBytes = 128;                      // one swizzle row: 64 halfs
constexpr int kSubK = kBK / 64;                     // 64-wide k sub-tiles a slot
constexpr int kSubABytes = kBM * kRowBytes;         // A sub-tile: BM rows x 128 B
constexpr int kSubBBytes = kBN * kRowBytes;         // B sub-tile (NT; NN: the same bytes)
constexpr int kStageABytes = kSubK * kSubABytes;    // A slice
constexpr int kStageBBytes = kSubK * kSubBBytes;    // B slice (both layouts)
constexpr int kStageBytes = kStageABytes + kStageBBytes;
constexpr int kNNBoxBytes = kBK * kRowBytes;        // NN: one {64 N, BK K} box, 8 or 16 KiB
// EPILOGUE=1 staging: each consumer's kWgRows rows x kStagePitch halfs, over the
// ring without persistence, or (PERSISTENT=1: the ring is being refilled for
// the next tile meanwhile) in shared memory of their own after the mbarriers.
constexpr int kStagePitch = kWgCols + 8;  // halfs; +16 B shifts rows by 4 banks
constexpr int kWgStagingBytes = kWgRows * kStagePitch * 2;
constexpr int kStagingBytes = kConsumers * kWgStagingBytes;
// EPILOGUE=2 staging: each consumer's kWgRows x BN halfs as TMA boxes of kWgRows
// rows x the widest of 64, 32 or 16 columns that divides BN (128, 64 or 32 bytes,
// swizzled over the same span), 1024-byte aligned.
// Persistent EPILOGUE=2: the consumers' buffers between the B slots and the mbarriers;
// in pingpong one buffer of one m64 slab (64 x BN), which each epilogue fills and
// stores slab by slab, and the consumers' alternate epilogues hand over.
constexpr bool kSharedTmaStaging = kPingpong && kTmaEpilogue;
constexpr int kTmaSlabRows = kSharedTmaStaging ? 64 : kWgRows;  // rows staged at a time
constexpr int kTmaBoxCols = kWgCols % 64 == 0 ? 64 : kWgCols % 32 == 0 ? 32 : 16;
constexpr int kTmaBoxBytes = kTmaSlabRows * kTmaBoxCols * 2;
constexpr int kTmaChunks = kTmaBoxCols / 8;  // 16-byte chunks per box row
constexpr int kWgTmaStagingBytes = kTmaSlabRows * kWgCols * 2;
constexpr int kOwnTmaStagingBytes =
    kPersistent && kTmaEpilogue ? (kSharedTmaStaging ? 1 : kConsumers) * kWgTmaStagingBytes
                                  : 0;
// SPLIT_REDUCE=1: a split's fp32 partial tile, BM rows x kRedPitch floats, in the ring.
constexpr int kRedPitch = kBN + 8;
constexpr int kRedBytes = kBM * kRedPitch * 4;
constexpr int kSmemBytes = 1024 /* alignment slack */ + kStages * kStageBytes +
                           2 * kStages * 8 /* full + empty mbarriers */ +
                           (kPersistent && kStagedEpilogue ? kStagingBytes : 0) +
                           kOwnTmaStagingBytes;

// ---- Illegal knob combinations (seed.json's "constraints", with their reason) -------
// The search checks the same rules before it spends nvcc time; these keep a
// hand-built or mistyped configuration from compiling into a kernel that hangs or
// computes garbage.

// Value ranges.
static_assert(kBK == 64 || kBK == 128,
              "BK: 64 or 128 (a 128B-swizzled TMA box row is 64 fp16: one or two rows a slot)");
static_assert(kConsumers == 1 || kConsumers == 2, "CONSUMERS: 1 or 2 consumer warpgroups");
static_assert(kStages >= 2 && kStages <= 16,
              "STAGES: 2..16 (the release scheme keeps one wgmma batch in flight: 2 slots)");
static_assert(ANVIL_PDL >= 0 && ANVIL_PDL <= 2, "PDL: 0 (off), 1 (release at CTA start) or 2 "
                                                "(release after the last load)");
static_assert(kCluster == 1 || kCluster == 2 || kCluster == 4, "CLUSTER: 1, 2 or 4");
static_assert(kClusterN == 1 || kClusterN == 2 || kClusterN == 4, "CLUSTER_N: 1, 2 or 4");
static_assert(kGroupM >= 1 && kGroupM <= 64, "GROUP_M: 1..64");
static_assert(kSplitK >= 1 && kSplitK <= 32, "SPLIT_K: 1..32 (grid.y = split)");
static_assert(ANVIL_SPLIT_REDUCE == ANVIL_SPLIT_REDUCE_WORKSPACE ||
                  ANVIL_SPLIT_REDUCE == ANVIL_SPLIT_REDUCE_CLUSTER,
              "SPLIT_REDUCE: 0 (workspace slabs) or 1 (cluster sum)");
static_assert(ANVIL_SWAP_AB == 0 || ANVIL_SWAP_AB == 1, "SWAP_AB: 0 or 1");
static_assert(kShapeM >= 0 && kShapeN >= 0 && kShapeK >= 0,
              "SHAPE_M/N/K: 0 (any shape) or the problem's dimension");
static_assert(ANVIL_EPILOGUE >= 0 && ANVIL_EPILOGUE <= 2,
              "EPILOGUE: 0 (Direct), 1 (StagedStores) or 2 (TmaStore)");
static_assert(ANVIL_PERSISTENT >= ANVIL_SCHEDULER_TILE_PER_CTA &&
                  ANVIL_PERSISTENT <= ANVIL_SCHEDULER_STREAM_K,
              "PERSISTENT: 0 (TilePerCta), 1 (Persistent) or 2 (StreamK)");
static_assert(ANVIL_SCHEDULE == 0 || ANVIL_SCHEDULE == 1,
              "SCHEDULE: 0 (KernelTmaWarpSpecializedCooperative) or 1 "
              "(KernelTmaWarpSpecializedPingpong)");
static_assert(ANVIL_SPLIT_COLS == 0 || ANVIL_SPLIT_COLS == 1,
              "SPLIT_COLS: 0 (rows) or 1 (columns)");

// Tile shape against the wgmma and TMA shapes.
static_assert(kBM % kConsumers == 0 && (kWgRows == 64 || kWgRows == 128),
              "rows per consumer (BM/CONSUMERS, or BM with SCHEDULE=1 or SPLIT_COLS=1) must be "
              "64 or 128: each consumer warpgroup computes whole m64 wgmma tiles, at most two");
static_assert(kBM <= 256, "BM: a TMA box dimension is at most 256 rows");
static_assert(kBN % 16 == 0 && kBN >= 16 && kBN <= 256,
              "BN: multiple of 16 in 16..256 (wgmma N is 8..256; a TMA box is at most 256 rows)");
static_assert(kNT || kBN % 64 == 0,
              "NN: BN must be a multiple of 64 (MN-major B is loaded as {64 N x BK K} boxes: "
              "the 128B swizzle limits a box's inner dimension to 128 bytes)");
static_assert(kStageABytes % 1024 == 0 && kStageBBytes % 1024 == 0,
              "every ring slot must stay 1024-byte aligned (the 128B swizzle atom)");

// Registers.
// ptxas allocates a consumer's registers up to its setmaxnreg.inc count, not the
// launch's 168: 192 accumulators compile without spills at 224 (and spill, with
// the wgmmas serialised, at 216).
static_assert(kMTiles * kAcc <= 128 || (kMTiles * kAcc <= 192 && kMTiles * kAcc + 32 <= kConsumerRegs),
              "fp32 accumulators per consumer thread: at most 128, or up to 192 with "
              "CONSUMER_REGS >= accumulators + 32 (fewer spill and serialise the wgmmas)");
static_assert(kProducerRegs % 8 == 0 && kProducerRegs >= 24 && kProducerRegs <= 56,
              "PRODUCER_REGS: setmaxnreg takes a multiple of 8 in 24..256 (24..56 here: the "
              "producer runs one TMA-issuing thread)");
static_assert(kConsumerRegs % 8 == 0 && kConsumerRegs >= 168 && kConsumerRegs <= 256,
              "CONSUMER_REGS: setmaxnreg takes a multiple of 8, at most 256");
static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536,
              "setmaxnreg budget exceeds the 64K-register file");
// setmaxnreg only moves registers the CTA was launched with (384 threads x 168
// with two consumers): a larger sum makes setmaxnreg.inc wait forever.
static_assert(kConsumers == 1 || kProducerRegs + 2 * kConsumerRegs <= 504,
              "setmaxnreg budget exceeds the CTA's launch allocation (384 threads x 168: "
              "setmaxnreg.inc would wait forever)");

// Shared memory.
static_assert(kSmemBytes <= 232448,
              "shared memory above the 227 KiB per-block limit of the H100 (ring slots, "
              "mbarriers, persistent staging buffers)");
static_assert(kPersistent || !kStagedEpilogue || kStagingBytes <= kStages * kStageBytes,
              "EPILOGUE=1 (StagedStores) stages the fp16 tile in the drained ring: "
              "BM*(BN+8)*2 bytes must fit in it");
static_assert(kPersistent || !kTmaEpilogue ||
                  kConsumers * kWgTmaStagingBytes <= kStages * kStageBytes,
              "EPILOGUE=2 (TmaStore) stages the fp16 tile in the drained ring: BM*BN*2 bytes "
              "must fit in it");
static_assert(!kClusterReduce || kRedBytes <= kStages * kStageBytes,
              "SPLIT_REDUCE=1 stages the fp32 partial tile in the drained ring: BM*(BN+8)*4 "
              "bytes must fit in it");
static_assert((kStagePitch * 2) % 16 == 0 && kWgStagingBytes % 16 == 0,
              "staging rows must be 16-byte aligned (16-byte shared loads)");
static_assert(kWgTmaStagingBytes % 1024 == 0 && kTmaBoxBytes % 1024 == 0,
              "EPILOGUE=2: boxes must stay 1024-byte aligned (the swizzle pattern's period)");
static_assert(!kTmaEpilogue || kWgCols % 16 == 0,
              "EPILOGUE=2: a consumer's columns must be whole TMA boxes of 16, 32 or 64");

// Kernel schedule and consumer split.
static_assert(!kPingpong || (kConsumers == 2 && kScheduler == TileScheduler::Persistent),
              "SCHEDULE=1 (Pingpong) needs two consumers taking alternate tiles of the "
              "Persistent tile loop (PERSISTENT=1); stream-K's partial tiles are not whole "
              "tiles");
static_assert(!kSplitCols || (kConsumers == 2 && !kPingpong && (kBM == 64 || kBM == 128) &&
                              kWgCols * 2 == kBN && kWgCols % 8 == 0),
              "SPLIT_COLS=1: two cooperative consumers (pingpong's own whole tiles), each "
              "taking all BM rows (64 or 128: one or two m64 wgmmas) and BN/2 columns");
static_assert(!kSplitCols || kNT || kWgCols % 64 == 0,
              "SPLIT_COLS=1 in NN: a consumer's B columns must start on a 64-wide TMA box (a "
              "descriptor cannot start inside a 128B-swizzle atom along N)");

// Tile scheduler, split-K and clusters.
static_assert(!kPersistent || kSplitK == 1,
              "PERSISTENT=1/2: the persistent loop's unit is a whole tile and stream-K's a "
              "(tile, k-tile) unit with its own partial tiles: SPLIT_K must be 1");
static_assert(kCluster == 1 || !kStreamK,
              "CLUSTER: not with stream-K (its CTAs own unequal unit ranges, so a cluster's "
              "CTAs would not consume the same slots in the same order)");
static_assert(kClusterSize <= 8,
              "CLUSTER x CLUSTER_N: at most 8 CTAs (the portable cluster size)");
static_assert(kClusterN == 1 || (!kPersistent && !kClusterReduce),
              "CLUSTER_N: only the tile-per-CTA grid (the persistent loop's clusters are "
              "columns of tiles; the cluster sum's cluster spans the K splits)");
static_assert(!kNT || (kBN / kCluster) % 8 == 0,
              "CLUSTER: each CTA's share of the B box must be whole 8-row (1024-byte) "
              "128B-swizzle atoms");
static_assert(!kClusterReduce || kSplitK <= 16,
              "SPLIT_REDUCE=1: a cluster holds at most 16 CTAs (the splits of a tile; "
              "non-portable above 8)");
static_assert(!kClusterReduce || (kSplitK > 1 && kCluster == 1 && !kPersistent),
              "SPLIT_REDUCE=1: needs SPLIT_K > 1 (it is a way of summing splits), CLUSTER 1 "
              "(its cluster spans the splits) and PERSISTENT 0 (whole-tile units)");
static_assert(!kSwapAB || (kNT && kDirectEpilogue && !kClusterReduce && kClusterSize == 1),
              "SWAP_AB=1: NT only (both operands K-major), direct stores (EPILOGUE 0: the "
              "staged epilogues and the cluster sum write rows), no multicast clusters");

// wgmma atom for m64 x BN x k16, A K-major, B K-major (NT) or MN-major (NN).
#define ANVIL_GMMA_ATOM_(n) gmma::MMA_64x##n##x16_F32F16F16_SS
#define ANVIL_GMMA_ATOM(n) ANVIL_GMMA_ATOM_(n)
constexpr gmma::Major kMajorB = kNT ? gmma::Major::K : gmma::Major::MN;
using GmmaAtom = ANVIL_GMMA_ATOM(ANVIL_WG_N)<gmma::Major::K, kMajorB>;

// Where consumer c's rows and columns start in the CTA tile: it owns rows
// c*kWgRows.. (cooperative), or columns c*kWgCols.. (SPLIT_COLS=1); pingpong's
// consumers own whole tiles (the callers pass 0 there).
__host__ __device__ constexpr int wg_row(int c) { return kSplitCols ? 0 : c * kWgRows; }
__host__ __device__ constexpr int wg_col(int c) { return kSplitCols ? c * kWgCols : 0; }

// ---- Timing probes (bench/cta_trace.cu only) --------------------------------
// With ANVIL_TRACE defined (never in a candidate build) the tile-per-CTA path
// records, per CTA, the SM clock at its milestones and the global timer at
// entry and exit into anvil_trace (see bench/cta_trace.cu for the slots).
#ifdef ANVIL_TRACE
__device__ unsigned long long anvil_trace[ANVIL_TRACE][256];
#define ANVIL_MARK(slot, value) \
  (anvil_trace[blockIdx.x + gridDim.x * blockIdx.y][(slot)] = (value))
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#else
#define ANVIL_MARK(slot, value) ((void)0)
#endif

// ---- PTX wrappers -----------------------------------------------------------

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// The address of shared-memory location `addr` (own window) in cluster CTA `rank`.
[[maybe_unused]] __device__ __forceinline__ uint32_t mapa(uint32_t addr, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}
// Arrives on the barrier at the same shared-memory offset in cluster CTA `rank`
// (release at CTA scope, as CUTLASS's ClusterBarrier: the wgmmas that read the
// slot have completed before the arrive, so nothing else needs ordering).
[[maybe_unused]] __device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(mapa(bar, rank))
               : "memory");
}
// This CTA's rank in its cluster (0 without clusters).
[[maybe_unused]] __device__ __forceinline__ uint32_t cluster_rank() {
  if constexpr (kClusterSize == 1) return 0;
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// The cluster barrier in two halves. The arrive's release orders this thread's
// earlier memory operations before any peer's wait returns; ptxas emits it as a
// GPU-scope MEMBAR, which costs ~0.7 µs even with nothing outstanding (measured on
// the H100, bench/cluster_cost.cu), so only the cluster sum's data exchange uses it.
[[maybe_unused]] __device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
[[maybe_unused]] __device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// Every thread of every CTA of the cluster (release/acquire: shared-memory writes
// before it are visible to the cluster after it).
[[maybe_unused]] __device__ __forceinline__ void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
// The start of a multicast cluster: every CTA's mbarriers are initialised before
// any peer multicasts into them or arrives on them. init_ring's
// fence.mbarrier_init.release.cluster orders the inits, so the arrive may be
// relaxed (no MEMBAR; the pattern PTX documents for that fence, and CUTLASS's).
[[maybe_unused]] __device__ __forceinline__ void cluster_sync_after_init() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
  cluster_wait();
}
[[maybe_unused]] __device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
[[maybe_unused]] __device__ __forceinline__ void sts_f2(uint32_t addr, float a, float b) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(a), "f"(b) : "memory");
}
// Returns once the phase with parity `parity` of the barrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// 2D TMA load of the box at element coordinates (x = inner, y = outer) into
// shared memory, completing `bytes` of transaction on mbarrier `bar`.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map,
                                            uint32_t bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(x), "r"(y)
      : "memory");
}
// The same box written to the same offset in every CTA of `mask` (cluster ranks),
// completing its bytes on the barrier at the same offset in each.
[[maybe_unused]] __device__ __forceinline__ void tma_load_2d_multicast(
    uint32_t dst, const CUtensorMap* map, uint32_t bar, int x, int y, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(x), "r"(y), "h"(mask)
      : "memory");
}
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map))
               : "memory");
}
// EPILOGUE=2: the box at shared address src to element coordinates (x, y) of the
// map's tensor, in the thread's current bulk group; elements outside the tensor
// are not written.
[[maybe_unused]] __device__ __forceinline__ void tma_store_2d(const CUtensorMap* map,
                                                              uint32_t src, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(x), "r"(y)
      : "memory");
}
[[maybe_unused]] __device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until the thread's bulk groups have read their shared memory (it may be rewritten).
[[maybe_unused]] __device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
}
// Orders this thread's generic-proxy shared-memory stores before later async-proxy
// (TMA) reads of them.
[[maybe_unused]] __device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Programmatic dependent launch (PDL >= 1). Every kernel of a call is launched
// with programmatic stream serialisation, so it may start (mbarrier init,
// tensor-map prefetch, setmaxnreg) while the previous kernel on the stream
// finishes. pdl_wait() blocks until that kernel has completed and its memory
// is visible: each kernel calls it before its first global load or store, so
// the call's results are those of plain stream order. pdl_release() lets the
// next kernel be scheduled once every CTA of this one has called it (or
// exited): the GEMM kernel calls it once its CTA has started (PDL=1) or once
// its producer has issued its last load (PDL=2). Only a call's last kernel
// releases early, so no kernel of one call waits inside the device time of
// another of the same call.
__device__ __forceinline__ void pdl_wait() {
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;\n" ::: "memory");
}
__device__ __forceinline__ void pdl_release() {
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads/writes across wgmma issue and
// wait points (the asm "modifies" every register, so nothing can be hoisted).
__device__ __forceinline__ void fence_acc(float (&acc)[kMTiles][kAcc]) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) asm volatile("" : "+f"(acc[mt][i])::"memory");
}

// Matrix descriptor (PTX ISA "matrix-descriptor-format"): bits 0-13 start
// address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0: every
// atom we point into is 1024-aligned), 62-63 layout (1 = 128-byte swizzle).
__device__ __forceinline__ uint64_t make_desc(uint32_t smem_addr, uint32_t lbo,
                                              uint32_t sbo) {
  uint64_t d = 0;
  d |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<uint64_t>((lbo & 0x3FFFF) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo & 0x3FFFF) >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

template <size_t... I>
__device__ __forceinline__ void wgmma_issue(uint64_t da, uint64_t db, float (&d)[kAcc],
                                            std::index_sequence<I...>) {
  GmmaAtom::fma(da, db, d[I]..., gmma::ScaleOut::One);
}

[[maybe_unused]] __device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// One store instruction for a pair, whatever nvcc can prove about the bounds: with
// the shape compiled in (SHAPE_M/N/K) it merged the pair and tail branches into two
// scalar stores, 14% slower on split-K partials (measured on the H100).
__device__ __forceinline__ void stg_b32(void* p, uint32_t v) {
  asm volatile("st.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
[[maybe_unused]] __device__ __forceinline__ void stg_f32x2(float* p, float v0, float v1) {
  asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(v0), "f"(v1) : "memory");
}

// pairs_ok: N is even and C is 4-byte aligned, so (row, even col) pairs are
// 4-byte aligned and can be stored as one half2.
// SWAP_AB=1: the kernel's M x N product is C transposed, so (row, col) goes to
// C[col * M + row] (C has M columns), one element at a time.
__device__ __forceinline__ void store_pair(__half* C, int M, int N, int row, int col,
                                           float v0, float v1, bool pairs_ok) {
  if (row >= M) return;
  if constexpr (kSwapAB) {
    if (col < N) C[static_cast<size_t>(col) * M + row] = __float2half_rn(v0);
    if (col + 1 < N) C[static_cast<size_t>(col + 1) * M + row] = __float2half_rn(v1);
    return;
  }
  __half* p = C + static_cast<size_t>(row) * N + col;
  if (pairs_ok && col + 1 < N) {
    stg_b32(p, pack_half2(v0, v1));
  } else {
    if (col < N) p[0] = __float2half_rn(v0);
    if (col + 1 < N) p[1] = __float2half_rn(v1);
  }
}

// Split-K partials: fp32, row-major M x N (ld = N) inside one split's slab.
// pairs_ok: N is even, so (row, even col) is 8-byte aligned (slabs are 256-byte
// aligned) and the pair goes out as one float2. ([[maybe_unused]] here and on
// other helpers below: not every knob setting references them.)
[[maybe_unused]] __device__ __forceinline__ void store_pair_f32(float* P, int M, int N,
                                                                int row, int col, float v0,
                                                                float v1, bool pairs_ok) {
  if (row >= M) return;
  if constexpr (kSwapAB) {  // in C's (transposed) layout, as store_pair
    if (col < N) P[static_cast<size_t>(col) * M + row] = v0;
    if (col + 1 < N) P[static_cast<size_t>(col + 1) * M + row] = v1;
    return;
  }
  float* p = P + static_cast<size_t>(row) * N + col;
  if (pairs_ok && col + 1 < N) {
    stg_f32x2(p, v0, v1);
  } else {
    if (col < N) p[0] = v0;
    if (col + 1 < N) p[1] = v1;
  }
}

// ---- named barriers (consumers only; id 0 is __syncthreads) --------------------

// Waits until Count threads (a multiple of 32) have arrived at barrier Id.
// Immediate operands, so ptxas reserves only the barriers actually used.
template <int Id, int Count>
__device__ __forceinline__ void named_bar_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(Count) : "memory");
}
// The same with a warpgroup-uniform id chosen at run time.
[[maybe_unused]] __device__ __forceinline__ void named_bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// Counts the calling warps towards barrier id without waiting.
[[maybe_unused]] __device__ __forceinline__ void named_bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

// ---- stream-K flags (PERSISTENT=2): release / acquire at GPU scope ----------------

[[maybe_unused]] __device__ __forceinline__ void st_release_gpu(unsigned* p, unsigned v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}
[[maybe_unused]] __device__ __forceinline__ unsigned ld_acquire_gpu(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// ---- EPILOGUE=1 helpers (smem staging, coalesced 16-byte stores) ----------------

[[maybe_unused]] __device__ __forceinline__ void sts_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
[[maybe_unused]] __device__ __forceinline__ uint4 lds_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// ==== The shared-memory pipeline (CUTLASS: PipelineTmaAsync) ======================

// The shared-memory ring: STAGES A slots, STAGES B slots, then the full and
// empty mbarriers, from a 1024-byte aligned base.
struct Ring {
  uint32_t a0, b0, bars;
  __device__ __forceinline__ uint32_t full(int s) const { return bars + 8u * s; }
  __device__ __forceinline__ uint32_t empty(int s) const { return bars + 8u * (kStages + s); }
  __device__ __forceinline__ uint32_t a(int s) const {
    return a0 + static_cast<uint32_t>(s * kStageABytes);
  }
  __device__ __forceinline__ uint32_t b(int s) const {
    return b0 + static_cast<uint32_t>(s * kStageBBytes);
  }
};

// Thread 0 initialises the barriers; the caller then __syncthreads().
__device__ __forceinline__ void init_ring(const Ring& ring) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(ring.full(s), 1);
      // lane 0 of each reading warp, of every CTA the slot's A or B is multicast to
      // (the CTA's cluster column and row: itself once)
      mbar_init(ring.empty(s), kSlotReaders * 4 * (kCluster + kClusterN - 1));
    }
    ANVIL_MARK(205, clock64());
    // Make the initialised barriers visible to the other threads and to the
    // async proxy (TMA complete_tx) before anyone uses them.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    ANVIL_MARK(206, clock64());
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
}

// ==== Tile schedulers: which tiles (and k-tiles) a CTA computes ====================

// Grouped raster: consecutive tile indices walk GROUP_M tile-rows column by column.
__device__ __forceinline__ void tile_origin(int pid, int tiles_m, int tiles_n, int& m0,
                                            int& n0) {
  const int group_size = kGroupM * tiles_n;
  const int first_m = (pid / group_size) * kGroupM;
  const int group_m = min(tiles_m - first_m, kGroupM);
  m0 = (first_m + (pid % group_size) % group_m) * kBM;
  n0 = ((pid % group_size) / group_m) * kBN;
}

// A cluster of CLUSTER x CLUSTER_N CTAs: rank r sits at row r % CLUSTER and
// column r / CLUSTER of the cluster's tiles. Those of one column share the B
// slice, those of one row the A slice.
__device__ __forceinline__ uint32_t cluster_row(uint32_t rank) {
  return kClusterN == 1 ? rank : rank % kCluster;
}
__device__ __forceinline__ uint32_t cluster_col(uint32_t rank) {
  return kClusterN == 1 ? 0 : rank / kCluster;
}
// Multicast masks: the CTAs of rank's cluster column (B) and cluster row (A).
__device__ __forceinline__ uint16_t column_mask(uint32_t rank) {
  return static_cast<uint16_t>(((1u << kCluster) - 1) << (cluster_col(rank) * kCluster));
}
__device__ __forceinline__ uint16_t row_mask(uint32_t rank) {
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < kClusterN; ++j) m |= 1u << (cluster_row(rank) + j * kCluster);
  return static_cast<uint16_t>(m);
}

// Stream-K (PERSISTENT=2): CTA b of G owns the units [b*U/G, (b+1)*U/G) of the
// U = tiles * k_tiles (tile, k-tile) units, tile-major: balanced to one unit.
[[maybe_unused]] __device__ __forceinline__ unsigned long long unit_start(
    unsigned b, unsigned long long units) {
  return b * units / gridDim.x;
}
// Floats of the flag words (one per CTA) before the partial tiles, 256-byte aligned.
[[maybe_unused]] __host__ __device__ __forceinline__ size_t flag_floats(unsigned ctas) {
  return (static_cast<size_t>(ctas) + 63) / 64 * 64;
}

// TileScheduler::TilePerCta: the CTA's one tile (m0, n0) and its k-tile range.
// A cluster of c = CLUSTER x CLUSTER_N CTAs (ci .. ci+c-1) takes a group of
// CLUSTER x CLUSTER_N tiles through the grouped raster over groups; rank r
// computes the tile at cluster row r % CLUSTER, column r / CLUSTER. Where the
// group sticks out of C, the ranks past M or N have their A or B boxes
// zero-filled by TMA and their stores masked, but they still load and
// multicast their shares.
// Split-K: split blockIdx.y (of gridDim.y) owns the balanced, contiguous k-tile
// range [kt_begin, kt_begin + n_kt). The host launches min(SPLIT_K, k_tiles)
// splits, so n_kt >= 1; an empty range would still store its zero accumulators.
struct TilePerCtaWork {
  uint32_t rank;  // in the cluster (0 without clusters)
  int m0, n0;     // the tile's origin in C
  int kt_begin;   // the split's first k-tile
  int n_kt;       // and how many
};
[[maybe_unused]] __device__ __forceinline__ TilePerCtaWork tile_per_cta_work(
    int tiles_m, int tiles_n, int k_tiles) {
  TilePerCtaWork w;
  w.rank = cluster_rank();
  if constexpr (kClusterSize == 1) {
    tile_origin(blockIdx.x, tiles_m, tiles_n, w.m0, w.n0);
  } else {
    tile_origin(blockIdx.x / kClusterSize, (tiles_m + kCluster - 1) / kCluster,
                (tiles_n + kClusterN - 1) / kClusterN, w.m0, w.n0);
    w.m0 = w.m0 * kCluster + static_cast<int>(cluster_row(w.rank)) * kBM;
    w.n0 = w.n0 * kClusterN + static_cast<int>(cluster_col(w.rank)) * kBN;
  }
  w.kt_begin = 0;
  w.n_kt = k_tiles;
  if constexpr (kSplitK > 1) {
    const long long splits = gridDim.y;
    const long long s = blockIdx.y;
    w.kt_begin = static_cast<int>(s * k_tiles / splits);
    w.n_kt = static_cast<int>((s + 1) * k_tiles / splits) - w.kt_begin;
  }
  return w;
}

// TileScheduler::Persistent and ::StreamK: this CTA takes the tiles blockIdx.x,
// blockIdx.x + gridDim.x, ... (its local tiles i = 0, 1, ...; unsigned: no
// overflow), each through the grouped raster. The host launches at most
// num_tiles CTAs, so n_local >= 1.
// CLUSTER c > 1: the unit is a group of c vertically adjacent tiles, and the c
// CTAs of cluster q take the groups q, q + gridDim.x/c, ... in lockstep (rank r
// computing rows m0 + r*BM, as without persistence), so their rings fill and
// drain in the same order and every slot's B share is multicast to all of them.
// Stream-K: with at least two waves of tiles, all but the last one or two waves
// are whole tiles dealt round-robin (as Persistent: neighbouring tiles at the
// same k share operands in L2); the (tile, k-tile) units of the tiles from
// sk_tile0 on are shared evenly, this CTA's being [u0, u1) counted from there.
struct PersistentWork {
  uint32_t rank;  // in the cluster (0 without clusters)
  unsigned first_unit, unit_step;
  int unit_rows;  // tile-row groups
  int tiles_m, tiles_n;
  unsigned num_tiles, n_local;
  unsigned dp_waves, sk_tile0;       // stream-K: whole-tile waves, first shared tile
  unsigned long long units, u0, u1;  // stream-K: shared units, this CTA's range

  // The origin (m0, n0) of local tile i.
  __device__ __forceinline__ void origin(unsigned i, int& m0, int& n0) const {
    tile_origin(static_cast<int>(first_unit + i * unit_step), unit_rows, tiles_n, m0, n0);
    if constexpr (kCluster > 1) m0 = m0 * kCluster + static_cast<int>(rank) * kBM;
  }
};
[[maybe_unused]] __device__ __forceinline__ PersistentWork persistent_work(int tiles_m,
                                                                           int tiles_n,
                                                                           int k_tiles) {
  PersistentWork w;
  w.rank = kCluster > 1 ? cluster_rank() : 0;
  w.first_unit = blockIdx.x / kCluster;
  w.unit_step = gridDim.x / kCluster;
  w.unit_rows = (tiles_m + kCluster - 1) / kCluster;
  w.tiles_m = tiles_m;
  w.tiles_n = tiles_n;
  w.num_tiles = static_cast<unsigned>(w.unit_rows) * static_cast<unsigned>(tiles_n);
  w.n_local = (w.num_tiles - w.first_unit + w.unit_step - 1) / w.unit_step;
  w.dp_waves = w.num_tiles >= 2 * gridDim.x ? w.num_tiles / gridDim.x - 1 : 0;
  w.sk_tile0 = w.dp_waves * gridDim.x;
  w.units = static_cast<unsigned long long>(w.num_tiles - w.sk_tile0) * k_tiles;
  w.u0 = unit_start(blockIdx.x, w.units);
  w.u1 = unit_start(blockIdx.x + 1, w.units);
  return w;
}

// ==== Producer main loop (CUTLASS: CollectiveMma::load) ============================
// One thread of the producer warpgroup issues every TMA load of the CTA.

// Producer: k-tile kt of the tile at (m0, n0) into slot s (A as BK/64 K-major
// boxes, one per sub-tile; then B as BK/64 K-major boxes in NT or BN/64
// MN-major boxes of BK K-rows in NN). In a cluster, a CTA loads its share of
// each operand its cluster column or row shares and multicasts it to them, and
// every full[s] expects the whole stage: B (CLUSTER > 1) in NT rows
// i*BN/CLUSTER.. of each sub-tile's box (whole 8-row swizzle atoms), in NN the
// boxes j with j % CLUSTER == i, for cluster row i; A (CLUSTER_N > 1) rows
// j*BM/CLUSTER_N.. of each sub-tile's box, for cluster column j.
// Its first half: the full barrier's expected bytes (the whole stage) and A.
__device__ __forceinline__ void load_stage_a(const Ring& ring, int s, int kt, int m0,
                                             uint32_t rank, const CUtensorMap* tmA) {
  mbar_arrive_expect_tx(ring.full(s), kStageBytes);
  if constexpr (kClusterN == 1) {
#pragma unroll
    for (int j = 0; j < kSubK; ++j)
      tma_load_2d(ring.a(s) + j * kSubABytes, tmA, ring.full(s), kt * kBK + j * 64, m0);
  } else {
    constexpr int kShare = kBM / kClusterN;
    const int col = static_cast<int>(cluster_col(rank));
#pragma unroll
    for (int j = 0; j < kSubK; ++j)
      tma_load_2d_multicast(ring.a(s) + j * kSubABytes + col * kShare * kRowBytes, tmA,
                            ring.full(s), kt * kBK + j * 64, m0 + col * kShare, row_mask(rank));
  }
}
// Its second half: B.
__device__ __forceinline__ void load_stage_b(const Ring& ring, int s, int kt, int n0,
                                             uint32_t rank, const CUtensorMap* tmB) {
  if constexpr (kCluster == 1) {
    if constexpr (kNT) {
#pragma unroll
      for (int j = 0; j < kSubK; ++j)
        tma_load_2d(ring.b(s) + j * kSubBBytes, tmB, ring.full(s), kt * kBK + j * 64, n0);
    } else {
#pragma unroll
      for (int j = 0; j < kBN / 64; ++j)
        tma_load_2d(ring.b(s) + j * kNNBoxBytes, tmB, ring.full(s), n0 + j * 64, kt * kBK);
    }
  } else {
    const int row = static_cast<int>(cluster_row(rank));
    if constexpr (kNT) {
      constexpr int kShare = kBN / kCluster;
#pragma unroll
      for (int j = 0; j < kSubK; ++j)
        tma_load_2d_multicast(ring.b(s) + j * kSubBBytes + row * kShare * kRowBytes, tmB,
                              ring.full(s), kt * kBK + j * 64, n0 + row * kShare,
                              column_mask(rank));
    } else {
      for (int j = row; j < kBN / 64; j += kCluster)
        tma_load_2d_multicast(ring.b(s) + j * kNNBoxBytes, tmB, ring.full(s), n0 + j * 64,
                              kt * kBK, column_mask(rank));
    }
  }
}
__device__ __forceinline__ void load_stage(const Ring& ring, int s, int kt, int m0, int n0,
                                           uint32_t rank, const CUtensorMap* tmA,
                                           const CUtensorMap* tmB) {
  load_stage_a(ring, s, kt, m0, rank, tmA);
  load_stage_b(ring, s, kt, n0, rank, tmB);
}

// Tile-per-CTA: ring stages thread 0 issues before the CTA barrier (see "Early
// fill"): the first, unless A is multicast too (CLUSTER_N > 1).
constexpr int kEarly = kClusterN == 1 ? 1 : 0;

// Tile-per-CTA: the split's n_kt k-tiles, from k-tile kEarly on (the first
// kEarly went before the CTA barrier: see "Early fill"); the ring position is
// the local index i. Releases the next kernel after its last load (PDL=2) if the
// call has no reduce kernel after this one.
[[maybe_unused]] __device__ __forceinline__ void producer_tile_per_cta(
    const Ring& ring, const TilePerCtaWork& w, bool last_kernel, const CUtensorMap* tmA,
    const CUtensorMap* tmB) {
  ANVIL_MARK(202, clock64());
  // Multicast clusters: the early stage's B share, now that every peer's
  // barriers are initialised.
  if constexpr (kCluster > 1 && kEarly > 0) load_stage_b(ring, 0, w.kt_begin, w.n0, w.rank, tmB);
  for (int i = kEarly; i < w.n_kt; ++i) {
    const int kt = w.kt_begin + i;  // global k-tile; i drives the ring
    const int s = i % kStages;
    const int n = i / kStages;  // how many times slot s was filled before
    if (n > 0) mbar_wait(ring.empty(s), (n - 1) & 1);  // consumers freed it
    if (i < 64) ANVIL_MARK(8 + i, clock64());
    load_stage(ring, s, kt, w.m0, w.n0, w.rank, tmA, tmB);
  }
  if (kPdlMode == PdlRelease::AfterLastLoad && last_kernel) pdl_release();
  // Multicast clusters: stay until every reader of the cluster has released
  // the last use of each slot (see "Cluster exit").
  if constexpr (kClusterSize > 1)
    for (int i = w.n_kt; i < w.n_kt + kStages; ++i) {
      const int n = i / kStages;
      if (n > 0) mbar_wait(ring.empty(i % kStages), (n - 1) & 1);
    }
}

// Persistent and stream-K: every k-tile of the CTA's tiles (stream-K: its whole
// tiles, then its share of units), the ring state running on across tiles.
[[maybe_unused]] __device__ __forceinline__ void producer_persistent(
    const Ring& ring, const PersistentWork& w, int k_tiles, const CUtensorMap* tmA,
    const CUtensorMap* tmB) {
  // Ring state of the CTA's running k-iteration g: slot s = g % STAGES and the
  // parity of its use n = g / STAGES; refill marks n >= 1.
  int s = 0;
  uint32_t parity = 0;
  bool refill = false;
  int m0 = 0, n0 = 0;
  const auto load = [&](int kt) {  // k-tile kt of the tile at (m0, n0)
    if (refill) mbar_wait(ring.empty(s), parity ^ 1);  // consumers freed use n-1
    load_stage(ring, s, kt, m0, n0, w.rank, tmA, tmB);
    if (++s == kStages) {
      s = 0;
      parity ^= 1;
      refill = true;
    }
  };
  // Stream-K: the whole tiles, then the shared range, walked with counters: no
  // division per unit (the producer's turnaround is on the ring's critical path).
  for (unsigned i = 0; i < (kStreamK ? w.dp_waves : w.n_local); ++i) {
    w.origin(i, m0, n0);
    for (int kt = 0; kt < k_tiles; ++kt) load(kt);
  }
  if constexpr (kStreamK) {
    int t = static_cast<int>(w.sk_tile0 + w.u0 / k_tiles);
    int kt = static_cast<int>(w.u0 % k_tiles);
    if (w.u0 < w.u1) tile_origin(t, w.tiles_m, w.tiles_n, m0, n0);
    for (unsigned long long u = w.u0; u < w.u1; ++u) {
      load(kt);
      if (++kt == k_tiles && u + 1 < w.u1) {
        kt = 0;
        tile_origin(++t, w.tiles_m, w.tiles_n, m0, n0);
      }
    }
  }
  if (kPdlMode == PdlRelease::AfterLastLoad) pdl_release();
  // Multicast clusters: stay until every reader of the cluster has released
  // the last use of each slot (see "Cluster exit").
  if constexpr (kCluster > 1)
    for (int j = 0; j < kStages; ++j) {
      if (refill) mbar_wait(ring.empty(s), parity ^ 1);
      if (++s == kStages) {
        s = 0;
        parity ^= 1;
        refill = true;
      }
    }
}

// ==== Consumer main loop (CUTLASS: CollectiveMma::mma) =============================
// Each consumer warpgroup waits for a slot's bytes, issues its wgmmas and releases
// the slot once they have read it.

// A consumer warp's release of slot s: in every CTA that multicasts into it
// (its cluster column and row), so none refills the slot while this CTA reads it.
__device__ __forceinline__ void release_slot(const Ring& ring, int s) {
  if constexpr (kClusterSize == 1) {
    mbar_arrive(ring.empty(s));
  } else {
    const uint32_t me = cluster_rank();
    mbar_arrive(ring.empty(s));
#pragma unroll
    for (uint32_t i = 0; i < kCluster; ++i) {
      const uint32_t r = cluster_col(me) * kCluster + i;
      if (r != me) mbar_arrive_cluster(ring.empty(s), r);
    }
    if constexpr (kClusterN > 1) {
#pragma unroll
      for (uint32_t j = 0; j < kClusterN; ++j) {
        const uint32_t r = cluster_row(me) + j * kCluster;
        if (r != me) mbar_arrive_cluster(ring.empty(s), r);
      }
    }
  }
}

// The wgmmas of slot s for the kWgRows rows of the A slice starting at row
// a_row0 and the kWgCols columns of the B slice starting at b_col0 into acc; on
// return this stage's wgmmas are in flight and the previous stage's are
// complete (its slot may be released).
__device__ __forceinline__ void mma_stage(const Ring& ring, int s, int a_row0, int b_col0,
                                          float (&acc)[kMTiles][kAcc]) {
  fence_acc(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kBK / 16; ++kk) {
    // K-major operands: sub-tile kk / 4, 32 bytes per k16 step inside it.
    const uint32_t k_off = (kk % 4) * 32;
    uint64_t db;
    if constexpr (kNT) {
      db = make_desc(ring.b(s) + (kk / 4) * kSubBBytes + b_col0 * kRowBytes + k_off, 16,
                     1024);  // K-major: b_col0 is whole 8-row atoms
    } else {
      db = make_desc(ring.b(s) + (b_col0 / 64) * kNNBoxBytes + kk * 16 * kRowBytes, kNNBoxBytes,
                     1024);  // MN-major: b_col0 is whole 64-wide boxes
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const uint32_t a_rows = a_row0 + mt * 64;
      const uint64_t da =
          make_desc(ring.a(s) + (kk / 4) * kSubABytes + a_rows * kRowBytes + k_off, 16, 1024);
      wgmma_issue(da, db, acc[mt], std::make_index_sequence<kAcc>{});
    }
  }
  wgmma_commit();
  fence_acc(acc);
  wgmma_wait<1>();
  fence_acc(acc);
}

// One tile's main loop for a consumer (rows a_row0.. and columns b_col0.. of the
// tile): waits for and consumes the ring positions of its k_tiles k-iterations
// from (s, parity), leaving them advanced, and
// releases every slot it used (the last one after wgmma_wait<0>). With
// `turn_done` >= 0 it lets the other pingpong consumer start (bar.arrive) as soon
// as its last wgmmas are issued.
[[maybe_unused]] __device__ __forceinline__ void consume_tile(const Ring& ring, int& s,
                                                              uint32_t& parity, int k_tiles,
                                                              int a_row0, int b_col0,
                                                              int turn_done,
                                                              float (&acc)[kMTiles][kAcc]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[mt][i] = 0.0f;
  int prev_s = 0;  // slot of the previous k-iteration of this tile
  for (int kt = 0; kt < k_tiles; ++kt) {
    mbar_wait(ring.full(s), parity);  // TMA bytes of use n of slot s landed
    mma_stage(ring, s, a_row0, b_col0, acc);
    if (kt > 0 && lane == 0) release_slot(ring, prev_s);  // the previous use
    prev_s = s;
    if (++s == kStages) {
      s = 0;
      parity ^= 1;
    }
  }
  if (turn_done >= 0) named_bar_arrive(turn_done, 256);
  wgmma_wait<0>();
  fence_acc(acc);
  // The tile's last k-iteration's slot: its wgmmas are complete, release it now
  // (k_tiles >= 1) so the producer can refill it during the epilogue.
  if (lane == 0) release_slot(ring, prev_s);
}

// The tile-per-CTA main loop, whose ring position is the local k-tile index.
// Consumer c's accumulators over the split's n_kt k-tiles; every slot use is
// released, the last one only in a multicast cluster (for the producers' exit).
[[maybe_unused]] __device__ __forceinline__ void consume_tile_per_cta(
    const Ring& ring, int n_kt, int c, int lane, float (&acc)[kMTiles][kAcc]) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int i = 0; i < kAcc; ++i) acc[mt][i] = 0.0f;

  for (int i = 0; i < n_kt; ++i) {
    const int s = i % kStages;
    mbar_wait(ring.full(s), (i / kStages) & 1);  // TMA bytes of slot s landed
    if (threadIdx.x == 128 && i < 64) ANVIL_MARK(72 + i, clock64());
    mma_stage(ring, s, wg_row(c), wg_col(c), acc);
    if (threadIdx.x == 128 && i < 64) ANVIL_MARK(136 + i, clock64());
    if (i > 0 && lane == 0) release_slot(ring, (i - 1) % kStages);
  }
  wgmma_wait<0>();
  fence_acc(acc);
  if (threadIdx.x == 128) ANVIL_MARK(3, clock64());
  // Multicast clusters: the last slot too, for the producers' exit.
  if (kClusterSize > 1 && lane == 0) release_slot(ring, (n_kt - 1) % kStages);
}

// ==== Epilogue (CUTLASS: CollectiveEpilogue::store) ================================
// From a consumer's fp32 accumulators to C (or to fp32 partials that a split-K or
// stream-K sum adds up).

// Accumulator fragment of m64nNk16 (per warp: 16 rows): d[4j+0..1] at (row
// lane/4, cols 8j + 2*(lane%4) + {0,1}), d[4j+2..3] at row + 8. fn(mt, j, row,
// col) visits the (row, col) of d[mt][4j+0..1]; its d[mt][4j+2..3] are at row + 8.
template <typename Fn>
__device__ __forceinline__ void for_each_fragment(int row0, int col0, Fn&& fn) {
  const int warp = (threadIdx.x % 128) / 32;
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    const int row = row0 + mt * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < kWgCols / 8; ++j) fn(mt, j, row, col0 + j * 8 + (lane % 4) * 2);
  }
}

// This warpgroup's kWgRows x kWgCols accumulators straight to C rows row0.., cols n0..
__device__ __forceinline__ void store_tile_direct(__half* C, int M, int N, int row0, int n0,
                                                  float (&acc)[kMTiles][kAcc]) {
  const bool pairs_ok = (N % 2 == 0) && (reinterpret_cast<uintptr_t>(C) % 4 == 0);
  for_each_fragment(row0, n0, [&](int mt, int j, int row, int col) {
    store_pair(C, M, N, row, col, acc[mt][4 * j + 0], acc[mt][4 * j + 1], pairs_ok);
    store_pair(C, M, N, row + 8, col, acc[mt][4 * j + 2], acc[mt][4 * j + 3], pairs_ok);
  });
}

// EPILOGUE=1: this warpgroup's tile converted to fp16 into its staging rows
// (`stage`, row r at r * kStagePitch halfs: rows start 4 banks apart, so a warp's
// 8 rows x 4 lanes of 4-byte stores hit 32 distinct banks), then, after the
// warpgroup's barrier `bar`, copied out to C rows row0.., cols n0.. with 16-byte
// stores, consecutive threads along a row. With `reuse` (a persistent CTA's
// buffer) a first barrier waits until the previous tile's copy-out has read it.
[[maybe_unused]] __device__ __forceinline__ void store_tile_staged(
    uint32_t stage, int bar, bool reuse, __half* C, int M, int N, int row0, int n0,
    float (&acc)[kMTiles][kAcc]) {
  if (reuse) named_bar_sync(bar, 128);
  for_each_fragment(0, 0, [&](int mt, int j, int r, int q) {
    const uint32_t a = stage + static_cast<uint32_t>((r * kStagePitch + q) * 2);
    sts_b32(a, pack_half2(acc[mt][4 * j + 0], acc[mt][4 * j + 1]));
    sts_b32(a + 8 * kStagePitch * 2, pack_half2(acc[mt][4 * j + 2], acc[mt][4 * j + 3]));
  });
  named_bar_sync(bar, 128);
  const bool vec_ok = (N % 8 == 0) && (reinterpret_cast<uintptr_t>(C) % 16 == 0);
  constexpr int kChunks = kWgCols / 8;  // 16-byte chunks per staged row
  const int t = threadIdx.x % 128;
#pragma unroll 4
  for (int idx = t; idx < kWgRows * kChunks; idx += 128) {
    const int r = idx / kChunks;
    const int q = idx % kChunks;
    const int row = row0 + r;
    const int col = n0 + q * 8;
    if (row >= M || col >= N) continue;
    const uint4 v = lds_v4(stage + static_cast<uint32_t>((r * kStagePitch + q * 8) * 2));
    __half* p = C + static_cast<size_t>(row) * N + col;
    if (vec_ok && col + 8 <= N) {
      *reinterpret_cast<uint4*>(p) = v;
    } else {
      const __half* h = reinterpret_cast<const __half*>(&v);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (col + e < N) p[e] = h[e];
    }
  }
}

// EPILOGUE=2: this warpgroup's tile converted to fp16 into its swizzled TMA
// boxes at `stage` (see the header), then, after the warpgroup's barrier `bar`,
// stored to C rows row0.., cols n0.. by TMA, issued by the warpgroup's thread 0.
// With `reuse` (a persistent CTA's buffer) that thread first waits until its
// previous tile's stores have read the buffer. Without c_tma (C's rows or base
// not 16-byte aligned) the fragments go straight to C.
[[maybe_unused]] __device__ __forceinline__ void store_tile_tma(
    uint32_t stage, int bar, bool reuse, const CUtensorMap* tmC, bool c_tma, __half* C, int M,
    int N, int row0, int n0, float (&acc)[kMTiles][kAcc]) {
  if (!c_tma) {
    store_tile_direct(C, M, N, row0, n0, acc);
    return;
  }
  const bool leader = threadIdx.x % 128 == 0;
  constexpr int kRowBytesC = kTmaBoxCols * 2;  // a box row: 128, 64 or 32 bytes
  // The rows go out kTmaSlabRows at a time (all at once unless the buffer is
  // pingpong's one slab); a slab waits until the previous one has been read.
#pragma unroll
  for (int slab = 0; slab < kWgRows / kTmaSlabRows; ++slab) {
    if (reuse || slab > 0) {
      if (leader) bulk_wait_read();
      named_bar_sync(bar, 128);
    }
    for_each_fragment(0, 0, [&](int mt, int j, int r, int q) {
      if (mt * 64 / kTmaSlabRows != slab) return;  // resolved at compile time
      // Column q (even) of row r: box q / kTmaBoxCols, 16-byte chunk (q % kTmaBoxCols) / 8
      // XOR the row's 128-byte line index (r * kRowBytesC / 128) modulo the chunks per
      // row (the TMA's 128/64/32-byte swizzle), 4 bytes per pair. Row r + 8 has the
      // same XOR (8 rows span 2, 4 or 8 whole lines: a multiple of the modulus), and
      // so does the slab's row r - slab * 64.
      const int chunk =
          ((q % kTmaBoxCols) / 8) ^ ((r * kRowBytesC / 128) & (kTmaChunks - 1));
      const uint32_t a = stage + static_cast<uint32_t>(
                                     (q / kTmaBoxCols) * kTmaBoxBytes +
                                     (r - slab * kTmaSlabRows) * kRowBytesC + chunk * 16 +
                                     (q % 8) * 2);
      sts_b32(a, pack_half2(acc[mt][4 * j + 0], acc[mt][4 * j + 1]));
      sts_b32(a + 8 * kRowBytesC, pack_half2(acc[mt][4 * j + 2], acc[mt][4 * j + 3]));
    });
    fence_proxy_async();
    named_bar_sync(bar, 128);
    const int slab_row0 = row0 + slab * kTmaSlabRows;
    if (leader && slab_row0 < M) {
#pragma unroll
      for (int b = 0; b < kWgCols / kTmaBoxCols; ++b)
        if (n0 + b * kTmaBoxCols < N)
          tma_store_2d(tmC, stage + static_cast<uint32_t>(b * kTmaBoxBytes),
                       n0 + b * kTmaBoxCols, slab_row0);
      bulk_commit();
    }
  }
}

// The warpgroup's fp16 epilogue, direct or staged (EPILOGUE).
[[maybe_unused]] __device__ __forceinline__ void store_tile(uint32_t stage, int bar, bool reuse,
                                                            const CUtensorMap* tmC, bool c_tma,
                                                            __half* C, int M, int N, int row0,
                                                            int n0, float (&acc)[kMTiles][kAcc]) {
  if constexpr (kTmaEpilogue)
    store_tile_tma(stage, bar, reuse, tmC, c_tma, C, M, N, row0, n0, acc);
  else if constexpr (kStagedEpilogue)
    store_tile_staged(stage, bar, reuse, C, M, N, row0, n0, acc);
  else
    store_tile_direct(C, M, N, row0, n0, acc);
}

// SPLIT_REDUCE=1, step 1: this consumer's kWgRows x kWgCols fp32 accumulators
// into its rows and columns of the CTA's partial tile at `red` (row r at
// r * kRedPitch floats).
[[maybe_unused]] __device__ __forceinline__ void stage_partial(uint32_t red, int c,
                                                               float (&acc)[kMTiles][kAcc]) {
  for_each_fragment(wg_row(c), wg_col(c), [&](int mt, int j, int r, int q) {
    const uint32_t a = red + static_cast<uint32_t>((r * kRedPitch + q) * 4);
    sts_f2(a, acc[mt][4 * j + 0], acc[mt][4 * j + 1]);
    sts_f2(a + 8 * kRedPitch * 4, acc[mt][4 * j + 2], acc[mt][4 * j + 3]);
  });
}

// SPLIT_REDUCE=1, step 3: split `rank` of `splits` sums its share of the tile's
// float4 groups over the partial tiles of every CTA of the cluster (same offset
// `red` in each), in the order 0..splits-1, and stores them to C as fp16. Run by
// the consumer threads (t = 0 .. 128*CONSUMERS-1).
[[maybe_unused]] __device__ __forceinline__ void reduce_cluster_tile(
    uint32_t red, int rank, int splits, int t, __half* C, int M, int N, int m0, int n0) {
  constexpr int kRowGroups = kBN / 4;
  constexpr int kGroups = kBM * kRowGroups;
  const int g_end = (rank + 1) * kGroups / splits;
  const bool vec_ok = (N % 4 == 0) && (reinterpret_cast<uintptr_t>(C) % 8 == 0);
  for (int g = rank * kGroups / splits + t; g < g_end; g += 128 * kConsumers) {
    const int r = g / kRowGroups;
    const int q = (g % kRowGroups) * 4;
    const int row = m0 + r;
    const int col = n0 + q;
    if (row >= M || col >= N) continue;
    const uint32_t local = red + static_cast<uint32_t>((r * kRedPitch + q) * 4);
    float4 sum = ld_cluster_f4(mapa(local, 0));
#pragma unroll 4
    for (int s = 1; s < splits; ++s) {
      const float4 v = ld_cluster_f4(mapa(local, static_cast<uint32_t>(s)));
      sum.x += v.x;
      sum.y += v.y;
      sum.z += v.z;
      sum.w += v.w;
    }
    __half* p = C + static_cast<size_t>(row) * N + col;
    if (vec_ok && col + 4 <= N) {
      uint2 packed;
      packed.x = pack_half2(sum.x, sum.y);
      packed.y = pack_half2(sum.z, sum.w);
      *reinterpret_cast<uint2*>(p) = packed;
    } else {
      const float f[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (col + e < N) p[e] = __float2half_rn(f[e]);
    }
  }
}

// A consumer thread's accumulators as float4 quads q = 0, 1, ...; a partial tile
// keeps quad q of consumer thread ct at q * threads + ct (coalesced, and the
// same thread of the same kernel reads it back: no layout mapping).
template <typename Fn>
[[maybe_unused]] __device__ __forceinline__ void for_each_quad(Fn&& fn,
                                                               float (&acc)[kMTiles][kAcc]) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j)
      fn(mt * (kAcc / 4) + j,
         make_float4(acc[mt][4 * j], acc[mt][4 * j + 1], acc[mt][4 * j + 2], acc[mt][4 * j + 3]));
}
[[maybe_unused]] __device__ __forceinline__ void add_quads(float (&acc)[kMTiles][kAcc],
                                                           const float4* src, int threads,
                                                           int ct) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int j = 0; j < kAcc / 4; ++j) {
      const float4 v = __ldcg(src + (mt * (kAcc / 4) + j) * threads + ct);
      acc[mt][4 * j] += v.x;
      acc[mt][4 * j + 1] += v.y;
      acc[mt][4 * j + 2] += v.z;
      acc[mt][4 * j + 3] += v.w;
    }
}

// Tile-per-CTA: consumer c's part of the tile at (w.m0, w.n0) goes to the split's
// workspace slab (SPLIT_K with slabs), into the cluster sum (SPLIT_REDUCE=1), or
// to C (staged in the drained ring at sA0 for EPILOGUE 1 and 2).
[[maybe_unused]] __device__ __forceinline__ void epilogue_tile_per_cta(
    uint32_t sA0, int c, int row0, int col0, const TilePerCtaWork& w, bool cluster_sum,
    const CUtensorMap* tmC, int c_tma, __half* C, int M, int N, float* partials, size_t slab,
    float (&acc)[kMTiles][kAcc]) {
  if (kSplitK > 1 && !kClusterReduce && partials != nullptr) {
    // This split's fp32 partial tile goes to its slab; splitk_reduce, launched
    // after this kernel, sums the slabs.
    const bool fpairs_ok = (N % 2 == 0);
    float* P = partials + static_cast<size_t>(blockIdx.y) * slab;
    for_each_fragment(row0, col0, [&](int mt, int j, int row, int col) {
      store_pair_f32(P, M, N, row, col, acc[mt][4 * j + 0], acc[mt][4 * j + 1], fpairs_ok);
      store_pair_f32(P, M, N, row + 8, col, acc[mt][4 * j + 2], acc[mt][4 * j + 3],
                     fpairs_ok);
    });
  } else if (cluster_sum) {
    // The ring is drained as for EPILOGUE=1 below; then every split's partial
    // tile is visible to the cluster, summed, and kept until all have read it.
    named_bar_sync<1, 128 * kConsumers>();
    stage_partial(sA0, c, acc);
    cluster_sync();
    reduce_cluster_tile(sA0, static_cast<int>(blockIdx.y), static_cast<int>(gridDim.y),
                        threadIdx.x - 128, C, M, N, w.m0, w.n0);
    cluster_sync();
  } else if constexpr (kStagedEpilogue) {
    // Staged in the ring: every consumer has passed its last full-barrier wait,
    // so all n_kt TMA loads (the producer issues exactly n_kt) have landed, and
    // after wgmma_wait<0> its own wgmmas no longer read the ring; the barrier
    // over the consumer threads (the producer warpgroup does not take part)
    // makes sure no other consumer's wgmma still reads it either. Each consumer
    // stages its part at the start of the ring.
    named_bar_sync<1, 128 * kConsumers>();
    if (threadIdx.x == 128) ANVIL_MARK(200, clock64());
    store_tile_staged(sA0 + static_cast<uint32_t>(c * kWgStagingBytes), 2 + c, false, C, M, N,
                      row0, col0, acc);
  } else if constexpr (kTmaEpilogue) {
    // Staged in the ring as for EPILOGUE=1, stored by TMA, read before the exit.
    if (c_tma) named_bar_sync<1, 128 * kConsumers>();
    if (threadIdx.x == 128) ANVIL_MARK(200, clock64());
    store_tile_tma(sA0 + static_cast<uint32_t>(c * kWgTmaStagingBytes), 2 + c, false, tmC,
                   c_tma != 0, C, M, N, row0, col0, acc);
    if (threadIdx.x % 128 == 0) bulk_wait_read();
  } else {
    store_tile_direct(C, M, N, row0, col0, acc);
  }
}

// ==== Consumer warpgroups of the persistent schedules ===============================
// Main loop then epilogue, tile by tile. `stage` is the consumer's staging buffer
// (EPILOGUE 1 and 2), `stage_bar` its warpgroup's named barrier. Pingpong's loop
// is written in the kernel body (see there why).

// TileScheduler::StreamK (cooperative): the CTA's units run as segments, one per
// tile they touch. A segment that starts inside a tile (only the CTA's first can)
// publishes its fp32 partial; the CTA that holds the tile's first k-tile adds the
// later CTAs' partials, in CTA order, to its own and stores the tile. It reaches
// that tile last in its range, while the later CTAs did theirs first.
[[maybe_unused]] __device__ __forceinline__ void consumer_stream_k(
    const Ring& ring, const PersistentWork& w, int k_tiles, int c, uint32_t stage,
    int stage_bar, const CUtensorMap* tmC, int c_tma, __half* C, int M, int N,
    float* partials, size_t slab, float (&acc)[kMTiles][kAcc]) {
  const int ct = static_cast<int>(threadIdx.x) - 128;  // consumer thread
  unsigned* flags = reinterpret_cast<unsigned*>(partials);
  float* parts = partials + flag_floats(gridDim.x);
  int s = 0;
  uint32_t parity = 0;
  bool stored = false;
  for (unsigned i = 0; i < w.dp_waves; ++i, stored = true) {
    int m0, n0;
    w.origin(i, m0, n0);
    consume_tile(ring, s, parity, k_tiles, wg_row(c), wg_col(c), -1, acc);
    store_tile(stage, stage_bar, stored, tmC, c_tma, C, M, N, m0 + wg_row(c), n0 + wg_col(c),
               acc);
  }
  int t = static_cast<int>(w.sk_tile0 + w.u0 / k_tiles);
  int kt0 = static_cast<int>(w.u0 % k_tiles);
  for (unsigned long long u = w.u0; u < w.u1; ++t, kt0 = 0) {
    // Units of tile t: [tile_end - k_tiles, tile_end), counted from sk_tile0.
    const unsigned long long tile_end = u - kt0 + k_tiles;
    const int n_kt = static_cast<int>((w.u1 < tile_end ? w.u1 : tile_end) - u);
    consume_tile(ring, s, parity, n_kt, wg_row(c), wg_col(c), -1, acc);
    u += n_kt;
    if (kt0 > 0) {
      float4* dst = reinterpret_cast<float4*>(parts + blockIdx.x * slab);
      for_each_quad([&](int q, float4 v) { dst[q * 128 * kConsumers + ct] = v; }, acc);
      __threadfence();
      named_bar_sync<1, 128 * kConsumers>();
      if (ct == 0) st_release_gpu(flags + blockIdx.x, 1u);
      continue;
    }
    for (unsigned b = blockIdx.x + 1;
         u < tile_end && b < gridDim.x && unit_start(b, w.units) < tile_end; ++b) {
      while (ld_acquire_gpu(flags + b) == 0) __nanosleep(64);
      const float4* src = reinterpret_cast<const float4*>(parts + b * slab);
      add_quads(acc, src, 128 * kConsumers, ct);
    }
    int m0, n0;
    tile_origin(t, w.tiles_m, w.tiles_n, m0, n0);
    store_tile(stage, stage_bar, stored, tmC, c_tma, C, M, N, m0 + wg_row(c), n0 + wg_col(c),
               acc);
    stored = true;
  }
}

// KernelTmaWarpSpecializedCooperative over the Persistent scheduler's tiles: both
// consumers work on every local tile, rows c * kWgRows.. (or columns); same ring
// state as the producer's, advanced in the same order.
[[maybe_unused]] __device__ __forceinline__ void consumer_cooperative(
    const Ring& ring, const PersistentWork& w, int k_tiles, int c, uint32_t stage,
    int stage_bar, const CUtensorMap* tmC, int c_tma, __half* C, int M, int N,
    float (&acc)[kMTiles][kAcc]) {
  int s = 0;
  uint32_t parity = 0;
  for (unsigned i = 0; i < w.n_local; ++i) {
    int m0, n0;
    w.origin(i, m0, n0);
    consume_tile(ring, s, parity, k_tiles, wg_row(c), wg_col(c), -1, acc);
    store_tile(stage, stage_bar, i > 0, tmC, c_tma, C, M, N, m0 + wg_row(c), n0 + wg_col(c),
               acc);
  }
}

// ==== The kernel (CUTLASS: GemmUniversal's operator()) =============================
// Sets up the ring, then the producer warpgroup runs the producer main loop and
// each consumer warpgroup the consumer main loop and the epilogue, for the tiles
// the tile scheduler gives the CTA.
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_tma_gemm(const __grid_constant__ CUtensorMap tmA,
                   const __grid_constant__ CUtensorMap tmB,
                   const __grid_constant__ CUtensorMap tmC, int c_tma, __half* __restrict__ C,
                   int m_arg, int n_arg, int k_arg, int tiles_m_arg, int tiles_n_arg,
                   float* __restrict__ partials, size_t slab) {
  // SHAPE_M/N/K: the problem as constants (see "Shape specialisation").
  const int M = kFixM > 0 ? kFixM : m_arg;
  const int N = kFixN > 0 ? kFixN : n_arg;
  const int K = kShapeK > 0 ? kShapeK : k_arg;
  const int tiles_m = kFixM > 0 ? (kFixM + kBM - 1) / kBM : tiles_m_arg;
  const int tiles_n = kFixN > 0 ? (kFixN + kBN - 1) / kBN : tiles_n_arg;
  extern __shared__ unsigned char smem_raw[];
  // Align the ring to 1024 bytes in the shared address space.
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t sA0 = (raw + 1023u) & ~1023u;        // A slots
  const uint32_t sB0 = sA0 + kStages * kStageABytes;  // B slots
  // Persistent EPILOGUE=2: the consumers' TMA staging buffers, then the mbarriers.
  const uint32_t sTma0 = sB0 + kStages * kStageBBytes;
  const Ring ring{sA0, sB0, sTma0 + kOwnTmaStagingBytes};
  const int k_tiles = (K + kBK - 1) / kBK;
  const int wg = threadIdx.x / 128;
  // The tensor maps are kernel parameters: their prefetch needs no wait, and
  // starts first, so the descriptors' fetch overlaps the tile arithmetic below.
  if (threadIdx.x == 0) {
    prefetch_tensormap(&tmA);
    prefetch_tensormap(&tmB);
    if constexpr (kTmaEpilogue) prefetch_tensormap(&tmC);
  }

#if ANVIL_PERSISTENT != ANVIL_SCHEDULER_TILE_PER_CTA
  const PersistentWork w = persistent_work(tiles_m, tiles_n, k_tiles);

  init_ring(ring);
  // With clusters, the peers' multicasts and arrivals target this CTA's barriers.
  if constexpr (kCluster > 1) cluster_sync_after_init();
  else __syncthreads();
  pdl_wait();
  if (kPdlMode == PdlRelease::AtCtaStart) pdl_release();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (threadIdx.x == 0) producer_persistent(ring, w, k_tiles, &tmA, &tmB);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int c = wg - 1;
    // This consumer's own staging buffer: EPILOGUE=1 after the mbarriers, 2 before.
    const uint32_t stage =
        kTmaEpilogue
            ? sTma0 + static_cast<uint32_t>(kSharedTmaStaging ? 0 : c * kWgTmaStagingBytes)
            : ring.bars + 16u * kStages + static_cast<uint32_t>(c * kWgStagingBytes);
    const int stage_bar = 2 + c;
    float acc[kMTiles][kAcc];
    if constexpr (kStreamK) {
      consumer_stream_k(ring, w, k_tiles, c, stage, stage_bar, &tmC, c_tma, C, M, N, partials,
                        slab, acc);
    } else if constexpr (kPingpong) {
      // KernelTmaWarpSpecializedPingpong: consumer c computes the local tiles
      // i = c, c + 2, ..., each whole. The ring holds every local tile's k-tiles in
      // order, so tile i's occupy the running positions [i * k_tiles, (i + 1) * k_tiles).
      // The consumers take turns through the main loop (named barriers 4 + c: "c's
      // turn"): consumer c waits for its turn before tile i > 0, and hands the turn over
      // once tile i's last wgmmas are issued, if tile i + 1 exists; its epilogue then
      // overlaps the other consumer's main loop. Taking turns is also what makes the
      // parity waits exact: a consumer starts waiting on the positions of tile i only
      // after every position before them was waited on, so no slot is ever more than
      // one phase ahead of its waiter.
      // (This loop stays in the kernel body: as a function of its own, nvcc's
      // inliner simplifies it before inlining it here and orders two
      // instructions of the k-loop differently, so the PTX would change.)
      for (unsigned i = c; i < w.n_local; i += 2) {
        int m0, n0;
        w.origin(i, m0, n0);
        const unsigned long long g = static_cast<unsigned long long>(i) * k_tiles;
        int s = static_cast<int>(g % kStages);
        uint32_t parity = static_cast<uint32_t>((g / kStages) & 1);
        if (i > 0) named_bar_sync(4 + c, 256);
        consume_tile(ring, s, parity, k_tiles, 0, 0, i + 1 < w.n_local ? 4 + (1 - c) : -1,
                     acc);
        if constexpr (kSharedTmaStaging) {
          // One TMA staging buffer for both (see "Pingpong"): tile i's epilogue
          // waits until tile i - 1's stores have read it, and hands it on once its
          // own stores have.
          if (i > 0) named_bar_sync(6 + c, 160);
          store_tile(stage, stage_bar, false, &tmC, c_tma, C, M, N, m0, n0, acc);
          if (i + 1 < w.n_local && threadIdx.x % 128 < 32) {
            if (threadIdx.x % 128 == 0) bulk_wait_read();
            __syncwarp();
            named_bar_arrive(6 + (1 - c), 160);
          }
        } else {
          store_tile(stage, stage_bar, i > 1, &tmC, c_tma, C, M, N, m0, n0, acc);
        }
      }
    } else {
      consumer_cooperative(ring, w, k_tiles, c, stage, stage_bar, &tmC, c_tma, C, M, N, acc);
    }
    // EPILOGUE=2: the last tile's TMA stores have read the buffer before the CTA
    // exits (its shared memory may then go to another CTA).
    if constexpr (kTmaEpilogue)
      if (threadIdx.x % 128 == 0) bulk_wait_read();
  }
  (void)partials;
  (void)slab;
#else
  if (threadIdx.x == 0) {
    ANVIL_MARK(0, global_ns());
    ANVIL_MARK(1, clock64());
  }
  const TilePerCtaWork w = tile_per_cta_work(tiles_m, tiles_n, k_tiles);

  init_ring(ring);
  if (threadIdx.x == 0) ANVIL_MARK(6, clock64());
  // The ring's first stage (see "Early fill"): the producer thread's own barriers
  // are initialised, so it issues what of it needs no peer before the barrier.
  if (kEarly > 0 && threadIdx.x == 0) {
    pdl_wait();  // the operands may come from the previous kernel
    ANVIL_MARK(8, clock64());
    load_stage_a(ring, 0, w.kt_begin, w.m0, w.rank, &tmA);
    if constexpr (kCluster == 1) load_stage_b(ring, 0, w.kt_begin, w.n0, w.rank, &tmB);
  }
  // With clusters, the peers' multicasts and arrivals target this CTA's barriers.
  if constexpr (kClusterSize > 1) cluster_sync_after_init();
  else __syncthreads();
  if (threadIdx.x == 0) ANVIL_MARK(7, clock64());
  pdl_wait();
  if (threadIdx.x == 0) ANVIL_MARK(2, clock64());
  // Split-K with slabs: the reduce kernel comes next.
  const bool last_kernel = gridDim.y == 1 || kClusterReduce;
  // SPLIT_REDUCE=1 with more than one split: the tile's splits sum in the cluster.
  const bool cluster_sum = kClusterReduce && gridDim.y > 1;
  if (kPdlMode == PdlRelease::AtCtaStart && last_kernel) pdl_release();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (threadIdx.x == 0) producer_tile_per_cta(ring, w, last_kernel, &tmA, &tmB);
    if (cluster_sum) {  // the producer warpgroup's part in the consumers' two barriers
      cluster_sync();
      cluster_sync();
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    if (threadIdx.x == 128) ANVIL_MARK(201, clock64());
    const int c = wg - 1;
    const int lane = threadIdx.x % 32;
    const int row0 = w.m0 + wg_row(c);  // this consumer's part of the tile
    const int col0 = w.n0 + wg_col(c);
    float acc[kMTiles][kAcc];
    consume_tile_per_cta(ring, w.n_kt, c, lane, acc);
    epilogue_tile_per_cta(sA0, c, row0, col0, w, cluster_sum, &tmC, c_tma, C, M, N, partials,
                          slab, acc);
    if (threadIdx.x == 128) {
      ANVIL_MARK(4, clock64());
      ANVIL_MARK(5, global_ns());
    }
  }
#endif  // ANVIL_PERSISTENT
}

// Copies a rows x cols row-major matrix into rows x ld (ld >= cols), zeroing
// the padding columns.
__global__ void pad_rows(const __half* __restrict__ src, __half* __restrict__ dst,
                         int rows, int cols, int ld) {
  pdl_wait();  // the GEMM kernel follows: no early release
  const size_t total = static_cast<size_t>(rows) * ld;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / ld;
    const int col = static_cast<int>(i % ld);
    dst[i] = col < cols ? src[r * cols + col] : __float2half_rn(0.0f);
  }
}

#if ANVIL_SPLIT_K > 1 && ANVIL_SPLIT_REDUCE == ANVIL_SPLIT_REDUCE_WORKSPACE
// Split-K reduce: C[i] = fp16(sum over s = 0..splits-1, in that order, of
// partials[s * slab + i]) for the flat index i < total = M*N (partials and C are
// both row-major with ld = N, so the reduce needs no row/col). Fixed order: the
// result is deterministic. slab is a multiple of 64 floats, so every float4 at
// i % 4 == 0 is 16-byte aligned; c_vec says C is 8-byte aligned (4 halfs per store).
__global__ void __launch_bounds__(256)
    splitk_reduce(const float* __restrict__ partials, __half* __restrict__ C,
                  size_t total, size_t slab, int splits, bool c_vec) {
  pdl_wait();
  pdl_release();  // the call's last kernel
  const size_t groups = (total + 3) / 4;
  for (size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t i = g * 4;
    if (i + 4 <= total) {
      // Every split's float4 is loaded before any is added (splits <= SPLIT_K, a
      // compile-time bound), so the loads overlap instead of waiting in rounds;
      // the sum still runs in split order.
      float4 v[kSplitK];
#pragma unroll
      for (int s = 0; s < kSplitK; ++s)
        if (s < splits) v[s] = *reinterpret_cast<const float4*>(partials + s * slab + i);
      float4 sum = v[0];
#pragma unroll
      for (int s = 1; s < kSplitK; ++s) {
        if (s >= splits) break;
        sum.x += v[s].x;
        sum.y += v[s].y;
        sum.z += v[s].z;
        sum.w += v[s].w;
      }
      const __half2 lo = __floats2half2_rn(sum.x, sum.y);
      const __half2 hi = __floats2half2_rn(sum.z, sum.w);
      if (c_vec) {
        uint2 packed;
        packed.x = *reinterpret_cast<const uint32_t*>(&lo);
        packed.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(C + i) = packed;
      } else {
        C[i + 0] = __low2half(lo);
        C[i + 1] = __high2half(lo);
        C[i + 2] = __low2half(hi);
        C[i + 3] = __high2half(hi);
      }
    } else {
      for (size_t e = i; e < total; ++e) {  // the last < 4 elements
        float sum = partials[e];
        for (int s = 1; s < splits; ++s) sum += partials[s * slab + e];
        C[e] = __float2half_rn(sum);
      }
    }
  }
}
#endif

// ---- host side ------------------------------------------------------------------

constexpr int round_up8(int x) { return (x + 7) / 8 * 8; }
size_t align256(size_t x) { return (x + 255) / 256 * 256; }

// Workspace: [padded A][padded B][split-K partials], each part 256-byte aligned;
// 0 bytes for a part that is unused.
//   partials: `splits` slabs of `slab` floats, slab = M*N rounded up to 64 floats
//   (256 bytes), split s's fp32 M x N partial (row-major, ld = N) at s * slab.
//   splits = min(SPLIT_K, k_tiles); with one split the kernel stores C directly
//   and no partials are needed.
struct PadPlan {
  bool pad_a, pad_b;
  size_t a_bytes, b_bytes;
  int splits;
  size_t slab;         // floats per split slab (0 with SPLIT_REDUCE=1)
  size_t part_bytes;   // splits * slab * 4, or 0
};
[[maybe_unused]] int sm_count();

// Stream-K: the persistent grid, min(SMs, units); 0 if the SM count is unknown.
unsigned stream_k_ctas(int M, int N, int K) {
  const long long units = static_cast<long long>((M + kBM - 1) / kBM) * ((N + kBN - 1) / kBN) *
                          ((K + kBK - 1) / kBK);
  const int sms = sm_count();
  return static_cast<unsigned>(units < sms ? units : sms);
}

PadPlan plan_padding(int M, int N, int K) {
  PadPlan p{};
  const int k_tiles = (K + kBK - 1) / kBK;
  p.splits = kSplitK < k_tiles ? kSplitK : k_tiles;
  if (p.splits > 1 && !kClusterReduce) {
    p.slab = (static_cast<size_t>(M) * N + 63) / 64 * 64;
    p.part_bytes = static_cast<size_t>(p.splits) * p.slab * 4;
  }
  if constexpr (kStreamK) {  // a flag word and a partial tile per CTA
    const unsigned ctas = stream_k_ctas(M, N, K);
    p.slab = static_cast<size_t>(kBM) * kBN;
    p.part_bytes = ctas == 0 ? 0 : (flag_floats(ctas) + ctas * p.slab) * 4;
  }
  p.pad_a = K % 8 != 0;
  p.pad_b = kNT ? (K % 8 != 0) : (N % 8 != 0);
  p.a_bytes = p.pad_a ? align256(static_cast<size_t>(M) * round_up8(K) * 2) : 0;
  p.b_bytes = !p.pad_b ? 0
              : kNT    ? align256(static_cast<size_t>(N) * round_up8(K) * 2)
                       : align256(static_cast<size_t>(K) * round_up8(N) * 2);
  return p;
}

PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// 2D fp16 tensor map: `inner` x `outer` elements, rows `ld` elements apart,
// box {box_inner, box_outer}, 128B swizzle (or `swizzle`), zero fill out of bounds.
bool make_map(CUtensorMap* map, const void* base, int inner, int outer, int ld,
              int box_inner, int box_outer,
              CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_fn();
  if (encode == nullptr) return false;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner),
                              static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_inner),
                             static_cast<cuuint32_t>(box_outer)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<void*>(base), dims,
                strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

cudaError_t configure_once() {
  static const cudaError_t err = [] {
    cudaError_t e = cudaFuncSetAttribute(wgmma_tma_gemm,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    // SPLIT_REDUCE=1: clusters of up to 16 splits (above 8 is "non-portable").
    if (e == cudaSuccess && kClusterReduce && kSplitK > 8)
      e = cudaFuncSetAttribute(wgmma_tma_gemm, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    return e;
  }();
  return err;
}

// SMs of the device current at the first call, queried once (0 if the query failed).
[[maybe_unused]] int sm_count() {
  static const int n = [] {
    int dev = 0;
    int sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 0;
    return sms;
  }();
  return n;
}

// PERSISTENT with CLUSTER c: how many clusters of c CTAs the device holds at once
// (a cluster sits within one GPC: on the H100 clusters of 4 hold 120 CTAs, not
// 132), queried once after configure_once(); 0 if the query failed.
[[maybe_unused]] int max_active_clusters() {
  static const int n = [] {
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim = {static_cast<unsigned>(kCluster), 1, 1};
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(kCluster);
    config.blockDim = dim3(kThreads);
    config.dynamicSmemBytes = kSmemBytes;
    config.attrs = &attr;
    config.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, wgmma_tma_gemm, &config) != cudaSuccess)
      return 0;
    return clusters;
  }();
  return n;
}

// Launches kernel<<<grid, block, smem, stream>>>(args...), as a programmatic
// dependent of the stream's previous kernel with PDL >= 1, in clusters of
// dims `cluster` (none when it is 1 x 1 x 1).
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   dim3 cluster, cudaStream_t stream, Args... args) {
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (kPdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n++].val.clusterDim = {cluster.x, cluster.y, cluster.z};
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = n;
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}

// Grid of a grid-stride elementwise kernel over `total` items, 256 per block.
unsigned stride_blocks(size_t total) {
  const size_t blocks = (total + 255) / 256;
  return static_cast<unsigned>(blocks < 4096 ? blocks : 4096);
}

cudaError_t launch_pad(const __half* src, __half* dst, int rows, int cols, int ld,
                       cudaStream_t stream) {
  return launch(pad_rows, stride_blocks(static_cast<size_t>(rows) * ld), 256, 0, dim3(1), stream,
                src, dst, rows, cols, ld);
}

// The tensor maps of the last call on this thread: encoding them costs host
// time on every call, and a map depends only on what it is keyed by here.
struct MapKey {
  const void* a;
  const void* b;
  const void* c;
  int M, N, K, lda, ldb;
  bool operator==(const MapKey& o) const {
    return a == o.a && b == o.b && c == o.c && M == o.M && N == o.N && K == o.K &&
           lda == o.lda && ldb == o.ldb;
  }
};
struct Maps {
  CUtensorMap a, b, c;  // c: EPILOGUE=2 only
  bool c_tma;           // c is valid: C's rows and base are 16-byte aligned
};
struct MapCache {
  bool valid = false;
  MapKey key;
  Maps maps;
};

bool get_maps(const __half* a, const __half* b, const __half* c, int M, int N, int K, int lda,
              int ldb, Maps* out) {
  thread_local MapCache cache;
  const MapKey key{a, b, kTmaEpilogue ? c : nullptr, M, N, K, lda, ldb};
  if (!cache.valid || !(cache.key == key)) {
    cache.valid = false;  // until every map is encoded
    Maps& m = cache.maps;
    m = Maps{};
    // K-major boxes are 64 wide in K (one swizzle row; BK = 128 loads two).
    // CLUSTER_N: a CTA loads its share of the A box (load_stage).
    if (!make_map(&m.a, a, K, M, lda, 64, kBM / kClusterN)) return false;
    // CLUSTER: an NT CTA loads its share of the B box (load_stage).
    const bool ok_b = kNT ? make_map(&m.b, b, K, N, ldb, 64, kBN / kCluster)
                          : make_map(&m.b, b, N, K, ldb, 64, kBK);
    if (!ok_b) return false;
    // EPILOGUE=2: C's boxes as the consumers stage them (store_tile_tma).
    m.c_tma = kTmaEpilogue && N % 8 == 0 && (reinterpret_cast<uintptr_t>(c) & 15) == 0;
    constexpr CUtensorMapSwizzle kSwizzleC = kTmaBoxCols == 64   ? CU_TENSOR_MAP_SWIZZLE_128B
                                             : kTmaBoxCols == 32 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                                 : CU_TENSOR_MAP_SWIZZLE_32B;
    if (m.c_tma && !make_map(&m.c, c, N, M, N, kTmaBoxCols, kTmaSlabRows, kSwizzleC)) return false;
    cache.key = key;
    cache.valid = true;
  }
  *out = cache.maps;
  return true;
}

}  // namespace

extern "C" size_t anvil_workspace_bytes(int M, int N, int K) {
  if (M < 1 || N < 1 || K < 1) return 0;
  if constexpr (kSwapAB) std::swap(M, N);  // as anvil_gemm
  const PadPlan p = plan_padding(M, N, K);
  return p.a_bytes + p.b_bytes + p.part_bytes;
}

extern "C" int anvil_gemm(const __half* A, const __half* B, __half* C, int M, int N,
                          int K, void* workspace, cudaStream_t stream) {
  if (M < 1 || N < 1 || K < 1) return 1;
  // SHAPE_M/N/K: built for one problem; any other is refused.
  if ((kShapeM > 0 && M != kShapeM) || (kShapeN > 0 && N != kShapeN) ||
      (kShapeK > 0 && K != kShapeK))
    return 7;
  // SWAP_AB=1: C^T (N x M) = B (N x K) times A^T, both operands still K-major;
  // the stores write C transposed (store_pair), the split-K slabs likewise.
  if constexpr (kSwapAB) {
    std::swap(A, B);
    std::swap(M, N);
  }
  // TMA needs 16-byte aligned global addresses (the contract gives 256).
  if (((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) & 15) != 0)
    return 2;

  const long long tiles_m = (M + kBM - 1) / kBM;
  const long long tiles_n = (N + kBN - 1) / kBN;
  if (tiles_m * tiles_n > INT_MAX || tiles_n * kGroupM > INT_MAX) return 4;

  // Operands whose rows are not 16-byte multiples go through the workspace.
  const PadPlan p = plan_padding(M, N, K);
  const __half* a_src = A;
  const __half* b_src = B;
  int lda = K;
  int ldb = kNT ? K : N;
  if ((p.pad_a || p.pad_b || p.part_bytes > 0) &&
      (workspace == nullptr || (reinterpret_cast<uintptr_t>(workspace) & 15) != 0))
    return 5;
  if (configure_once() != cudaSuccess) return 3;
  if (p.pad_a || p.pad_b) {
    __half* ws_a = static_cast<__half*>(workspace);
    __half* ws_b = reinterpret_cast<__half*>(static_cast<char*>(workspace) + p.a_bytes);
    if (p.pad_a) {
      lda = round_up8(K);
      if (launch_pad(A, ws_a, M, K, lda, stream) != cudaSuccess) return 1;
      a_src = ws_a;
    }
    if (p.pad_b) {
      ldb = kNT ? round_up8(K) : round_up8(N);
      const cudaError_t err = kNT ? launch_pad(B, ws_b, N, K, ldb, stream)
                                  : launch_pad(B, ws_b, K, N, ldb, stream);
      if (err != cudaSuccess) return 1;
      b_src = ws_b;
    }
  }

  Maps maps;
  if (!get_maps(a_src, b_src, C, M, N, K, lda, ldb, &maps)) return 6;

  // grid.x: the tile (grouped raster as without split-K); grid.y: the split, the
  // slowest-varying launch index, so co-resident CTAs are mostly the same split
  // (same k-range) of neighbouring tiles and keep the raster's L2 reuse.
  float* partials = p.part_bytes > 0 ? reinterpret_cast<float*>(static_cast<char*>(workspace) +
                                                            p.a_bytes + p.b_bytes)
                                 : nullptr;
#if ANVIL_PERSISTENT != ANVIL_SCHEDULER_TILE_PER_CTA
  // Persistent: one CTA per SM at most (launch bounds 1), each looping over tiles;
  // with CLUSTER c, as many clusters as fit at once, each looping over groups of
  // c tile-rows.
  const int sms = sm_count();
  if (sms < 1) return 3;
  const long long units = (tiles_m + kCluster - 1) / kCluster * tiles_n;
  const int slots = kCluster == 1 ? sms : max_active_clusters();
  if (slots < 1) return 3;
  dim3 grid(static_cast<unsigned>((units < slots ? units : slots) * kCluster), 1u);
  if constexpr (kStreamK) {
    // Stream-K: every CTA resident at once (one per SM), so a CTA may wait for a
    // later one's partial. The flags start at 0 on every call.
    grid.x = stream_k_ctas(M, N, K);
    if (grid.x == 0 || partials == nullptr) return 5;
    if (cudaMemsetAsync(partials, 0, grid.x * sizeof(unsigned), stream) != cudaSuccess) return 1;
  }
#else
  // One cluster per CLUSTER tile-rows x CLUSTER_N tile-columns (the last groups
  // may stick out of C).
  const long long groups = (tiles_m + kCluster - 1) / kCluster *
                           ((tiles_n + kClusterN - 1) / kClusterN);
  if (groups * kClusterSize > INT_MAX) return 4;
  const dim3 grid(static_cast<unsigned>(groups * kClusterSize), static_cast<unsigned>(p.splits));
#endif
  // SPLIT_REDUCE=1: a tile's splits form one cluster (grid.y = splits).
  const dim3 cluster = kClusterReduce && p.splits > 1 ? dim3(1, static_cast<unsigned>(p.splits))
                                                      : dim3(kClusterSize);
  if (launch(wgmma_tma_gemm, grid, kThreads, kSmemBytes, cluster, stream, maps.a, maps.b, maps.c,
             maps.c_tma ? 1 : 0, C, M, N, K, static_cast<int>(tiles_m),
             static_cast<int>(tiles_n), partials, p.slab) != cudaSuccess)
    return 1;
#if ANVIL_SPLIT_K > 1 && ANVIL_SPLIT_REDUCE == ANVIL_SPLIT_REDUCE_WORKSPACE
  if (p.splits > 1) {
    const size_t total = static_cast<size_t>(M) * N;
    const bool c_vec = (reinterpret_cast<uintptr_t>(C) & 7) == 0;
    if (launch(splitk_reduce, stride_blocks((total + 3) / 4), 256, 0, dim3(1), stream, partials, C,
               total, p.slab, p.splits, c_vec) != cudaSuccess)
      return 1;
  }
#endif
  return 0;
}
