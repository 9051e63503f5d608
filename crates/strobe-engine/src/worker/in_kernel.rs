//! Frames the backend generates itself (`xdp-live`'s kernel program): whether the port's
//! flows can be handed to it, handing them over, and watching the run while the program
//! sends (the worker then only publishes counters and minds the switches).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use strobe_io::kernel_frames::{KernelFlow, KernelPace, KernelStamp};
use strobe_io::{Backend, TimeBase};
use strobe_model::{FlowSpec, SizeSequence};

use super::flow_state::FlowState;
use super::report::PortReport;
use super::wait::hold_while_paused;
use super::{LatePolicy, PortShape, RunOptions};
use crate::clock::{Clock, WallClock};
use crate::generator::FlowGenerator;

/// Whether the backend generates the port's frames itself, as [`start_in_kernel`] found.
pub(super) enum KernelStart {
    /// Its program runs these flows: the worker watches ([`run_in_kernel`]).
    Started(Vec<KernelFlow>),
    /// The engine writes the frames; when the program could have but did not, why.
    Engine(Option<String>),
}

/// Hands the port's flows to the backend's own program when it offers one and can generate
/// them (not for scheduled-time backends, nor when asked for engine frames), and starts it.
/// The program is held from the start when the run starts paused.
pub(super) fn start_in_kernel<B: Backend>(
    backend: &mut B,
    states: &[FlowState],
    flows: &[FlowSpec],
    clock: &Clock,
    opts: &RunOptions,
    shape: &PortShape,
    stop: &AtomicBool,
) -> KernelStart {
    let PortShape {
        scheduled_time,
        paced,
        latency_measured,
        ..
    } = *shape;
    let mut generation = None;
    if let (false, false, Some(generator)) = (
        scheduled_time,
        opts.engine_frames,
        backend.kernel_generator(),
    ) {
        // Every frame is stamped where latency is measured; elsewhere receivers only check
        // that a frame's stamp belongs to the run.
        let stamp = if latency_measured {
            KernelStamp::PerFrame
        } else {
            KernelStamp::Fixed(clock.realtime_now_ns())
        };
        if let Some(handed) = kernel_flows(states, flows, paced, opts, stamp) {
            let handed = handed.and_then(|f| generator.refuses(&f).map_or(Ok(f), Err));
            // Held from the start when the run starts paused.
            generator.hold(
                opts.pause
                    .as_deref()
                    .is_some_and(|p| p.load(Ordering::Relaxed)),
            );
            // A synchronized start: the kernel's program starts at the agreed time.
            if let Some(at) = opts.start_at_unix_ns {
                // 10 ms at a time, so that a stop ends the wait.
                loop {
                    let now = clock.realtime_now_ns();
                    if now >= at || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_nanos((at - now).min(10_000_000)));
                }
            }
            match handed.map(|f| generator.start(&f).map(|()| f)) {
                Ok(Ok(handed)) => return KernelStart::Started(handed),
                // The engine's ring path still works: fall back to it, saying why.
                Ok(Err(e)) => {
                    generation = Some(format!(
                        "frames written by the engine: generating them in the kernel failed to start ({e})"
                    ))
                }
                Err(why) => {
                    generation = Some(format!(
                        "frames written by the engine, not in the kernel: its program cannot generate {why}"
                    ))
                }
            }
        }
    }
    KernelStart::Engine(generation)
}

/// How often a port whose frames the kernel generates looks at the stop switch, the time
/// limit and the counters.
const KERNEL_POLL: StdDuration = StdDuration::from_millis(1);

/// A paced flow's deadlines as a backend's program keeps them ([`KernelPace`]), and its
/// frame count (None: until stopped); or why the program cannot keep them: constant rates
/// and bursts of one frame size from the run's start, on the absolute schedule.
fn kernel_pace(
    spec: &FlowSpec,
    opts: &RunOptions,
) -> Result<(Option<u64>, Option<KernelPace>), String> {
    if opts.late_policy == LatePolicy::Shift {
        return Err(
            "departures under the late policy `shift` (its schedule catches up instead)".into(),
        );
    }
    // The program keeps one gap: several sizes only where the gap does not depend on the
    // size (a rate in frames per second, not in bits).
    let mut periodic = None;
    for size in spec.size.distinct_sizes() {
        let p = spec.schedule.periodic(size)?;
        match periodic {
            None => periodic = Some(p),
            Some(q) if q == p => {}
            Some(_) => {
                return Err(
                    "several frame sizes at a rate in bits (each size has its own gap; the program keeps one)"
                        .into(),
                )
            }
        }
    }
    let p = periodic.ok_or("a flow without frame sizes (a strobe bug)")?;
    Ok((
        p.packets,
        Some(KernelPace {
            gap_ns: p.gap_ns,
            gap_frac: p.gap_frac,
            burst: p.burst,
            burst_gap_ns: p.burst_gap_ns,
            late_tolerance_ns: opts.late_tolerance_ns,
        }),
    ))
}

/// Most frames in a size sequence handed to a backend (longer ones stay with the engine).
const MAX_SIZE_CYCLE: u64 = 1 << 16;

/// The flow's next frame sizes, one period of its sequence: `first` (the size of a frame
/// already planned) and then what `sizes` gives (the sequence repeats them over and over),
/// for a backend that generates frames itself.
fn size_cycle(
    spec: &FlowSpec,
    first: Option<u32>,
    mut sizes: SizeSequence,
) -> Result<Vec<u32>, String> {
    match spec.size.period() {
        None => Err("random frame sizes (a sequence that never repeats)".into()),
        Some(n) if n > MAX_SIZE_CYCLE => Err(format!(
            "a sequence of frame sizes that repeats only after {n} frames"
        )),
        Some(n) => Ok(first
            .into_iter()
            .chain(std::iter::from_fn(|| Some(sizes.next_size())))
            .take(n as usize)
            .collect()),
    }
}

/// Whether `backend`'s own program will pace `flows` (flows it can generate, paced at
/// constant rates or in bursts), by the checks [`run_port`] makes: the engine's floor, for
/// pacing hand-overs itself, is then not needed. Should the program fail to start after
/// all, the engine paces one frame per hand-over.
pub(crate) fn paced_in_kernel<B: Backend>(
    backend: &mut B,
    flows: &[FlowSpec],
    opts: &RunOptions,
) -> bool {
    if flows.is_empty()
        || opts.engine_frames
        || opts.unpaced
        || backend.time_base() == TimeBase::Scheduled
    {
        return false;
    }
    let Some(generator) = backend.kernel_generator() else {
        return false;
    };
    let handed: Result<Vec<KernelFlow>, String> = flows
        .iter()
        .map(|spec| {
            let plan = kernel_pace(spec, opts)?;
            let gen = FlowGenerator::compile(spec, crate::DEFAULT_RUN_TAG, opts.seq_start)
                .map_err(|e| e.to_string())?;
            let sizes = (None, spec.size.sequence(spec.size_seed));
            handed_over(spec, &gen, sizes, plan, KernelStamp::PerFrame)
        })
        .collect();
    handed.is_ok_and(|f| generator.refuses(&f).is_none())
}

/// The port's flows as the engine hands them to a backend that generates them itself: one
/// flow, paced or with an unpaced frame budget, or several paced ones; Err says why one
/// cannot be. None: not a case for it (several flows unpaced: the engine orders them by
/// their schedules).
fn kernel_flows(
    states: &[FlowState],
    flows: &[FlowSpec],
    paced: bool,
    opts: &RunOptions,
    stamp: KernelStamp,
) -> Option<Result<Vec<KernelFlow>, String>> {
    let mut handed = Vec::with_capacity(flows.len());
    for (s, spec) in states.iter().zip(flows) {
        // Unpaced: the frame budget; paced: the deadlines too, when the program can keep
        // them.
        let plan = match (paced, s.unpaced_budget) {
            (true, _) => kernel_pace(spec, opts),
            (false, Some(budget)) => Ok(((budget != u64::MAX).then_some(budget), None)),
            (false, None) => return None,
        };
        // A paced flow has planned its first frame already (its size drawn).
        let first = match (s.fixed, s.next) {
            (Some((size, _)), _) => Some(size),
            (None, Some((_, template))) => Some(s.gen.frame_size(template)),
            (None, None) => None,
        };
        let flow =
            plan.and_then(|plan| handed_over(spec, &s.gen, (first, s.sizes.clone()), plan, stamp));
        match flow {
            Ok(flow) => handed.push(flow),
            Err(why) if flows.len() > 1 => return Some(Err(format!("flow {}: {why}", spec.name))),
            Err(why) => return Some(Err(why)),
        }
    }
    Some(Ok(handed))
}

/// The flow as the engine hands it to a backend that generates it: its sizes from `first`
/// and `sizes` on ([`size_cycle`]), `frames` of them paced by `pace`, stamped with `stamp`.
fn handed_over(
    spec: &FlowSpec,
    gen: &FlowGenerator,
    (first, sizes): (Option<u32>, SizeSequence),
    (frames, pace): (Option<u64>, Option<KernelPace>),
    stamp: KernelStamp,
) -> Result<KernelFlow, String> {
    let sizes = size_cycle(spec, first, sizes)?;
    let flow = gen.kernel_flow(frames, stamp, &sizes)?;
    Ok(KernelFlow { pace, ..flow })
}

/// Runs the flows that the backend generates itself (`xdp-live`'s kernel program) until
/// their frame counts, the time limit or `stop`: the worker only watches, and publishes
/// counters.
pub(super) fn run_in_kernel<B: Backend>(
    port_name: &str,
    backend: &mut B,
    mut states: Vec<FlowState>,
    flows: &[KernelFlow],
    clock: &Clock,
    opts: &RunOptions,
    stop: &AtomicBool,
) -> PortReport {
    let mut report = PortReport {
        name: port_name.to_string(),
        backend: backend.describe(),
        batch: 0,
        ..PortReport::default()
    };
    // The generator runs already (started by the caller, which waited for its first frame):
    // the run's time counts from here.
    let mut wall = WallClock::new(clock);
    let started = (clock.now_ticks(), wall.now_ns(clock));
    report.t0_unix_ns = Some(started.1);
    let mut ended = started.0;
    let mut run = Err("the backend no longer offers to generate frames (a strobe bug)".to_string());
    let mut generated = vec![0; flows.len()];
    if let Some(generator) = backend.kernel_generator() {
        report.in_kernel = true;
        report.generation = Some(generation_text(flows));
        report.tx_stamps = flows
            .iter()
            .any(KernelFlow::stamped_per_frame)
            .then(|| generator.stamp_source());
        let (result, watched_until) = run_generator(
            generator,
            flows,
            &mut states,
            clock,
            opts,
            stop,
            &mut report,
        );
        run = result.map_err(|e| e.to_string());
        ended = watched_until;
        // What the program counted, also when its run failed.
        for (f, n) in generated.iter_mut().enumerate() {
            *n = generator.generated(f);
        }
    }
    let runs = match &run {
        Ok(runs) if runs.len() == flows.len() => runs.clone(),
        Ok(_) => {
            run = Err("the backend reported another number of flows (a strobe bug)".into());
            Vec::new()
        }
        Err(_) => Vec::new(),
    };
    for (r, pace) in runs.iter().zip(flows.iter().map(|f| f.pace)) {
        let Some(pace) = pace else { continue };
        report.late_frames += r.late_frames;
        report.max_late_ns = report.max_late_ns.max(r.max_late_ns);
        let lateness = report
            .kernel_lateness
            .get_or_insert([0; strobe_io::kernel_frames::LATENESS_DECADES]);
        for (sum, n) in lateness.iter_mut().zip(r.lateness) {
            *sum += n;
        }
        // The schedule's span from the first deadline to the last frame's.
        let gap = pace.gap_ns as f64 + f64::from(pace.gap_frac) / 4_294_967_296.0;
        let frames = r.frames.saturating_sub(1);
        let bursts = frames / pace.burst.max(1);
        let planned = (frames as f64 * gap) as u64 + bursts * pace.burst_gap_ns;
        report.planned_ns = report.planned_ns.max(planned);
    }
    if let Err(e) = &run {
        report.failure = Some(e.clone());
        report.stopped_early = true;
    }
    match backend.finish() {
        Ok(stats) => report.xmit_errors = stats.xmit_errors,
        Err(e) => {
            report.failure.get_or_insert(e.to_string());
            report.stopped_early = true;
        }
    }
    let frames: Vec<u64> = match runs.is_empty() {
        false => runs.iter().map(|r| r.frames).collect(),
        true => generated,
    };
    let first = runs.iter().filter_map(|r| r.first_ns).min();
    let last = runs.iter().filter_map(|r| r.last_ns).max();
    report.frames = frames.iter().sum();
    report.bytes = flows
        .iter()
        .zip(&frames)
        .map(|(f, &n)| f.frame_bytes(n))
        .sum();
    // From the first stamp to the last where frames carry their own, else the worker's
    // view of the run (within the poll interval); a pause is not sending time.
    report.elapsed_ns = match (first, last) {
        (Some(first), Some(last)) => last.saturating_sub(first).saturating_sub(report.paused_ns),
        _ => clock
            .ticks_to_ns(ended.saturating_sub(started.0))
            .saturating_sub(report.paused_ns),
    };
    for (f, state) in states.iter_mut().enumerate() {
        let r = &mut state.report;
        let run = runs.get(f);
        r.frames = frames[f];
        r.bytes = flows[f].frame_bytes(r.frames);
        // A flow that sent nothing has no first or last frame (as the engine reports it).
        let sent = r.frames > 0;
        r.first_ns = sent.then(|| {
            run.and_then(|r| r.first_ns)
                .map_or(0, |ns| ns.saturating_sub(started.1))
        });
        r.last_ns = sent.then(|| {
            run.and_then(|r| r.last_ns)
                .map_or(report.elapsed_ns, |ns| ns.saturating_sub(started.1))
        });
        if let Some(live) = &state.live {
            live.publish_tx(r.id, r.frames, r.bytes);
        }
    }
    report.flows = states.into_iter().map(|s| s.report).collect();
    report
}

/// What the report says about frames generated in the kernel.
fn generation_text(flows: &[KernelFlow]) -> String {
    let flow_text = |flow: &KernelFlow| {
        let sizes = match flow.templates.len() {
            1 => String::new(),
            n => format!("{n} frame sizes (a cycle of {} frames), ", flow.cycle.len()),
        };
        format!(
            "{sizes}{} varying field{}, sequence numbers, {}",
            flow.fields.len(),
            if flow.fields.len() == 1 { "" } else { "s" },
            if flow.stamped_per_frame() {
                "a transmit stamp per frame"
            } else {
                "one fixed transmit stamp (latency not measured)"
            },
        )
    };
    let what = match flows {
        [flow] => flow_text(flow),
        _ => format!(
            "{} flows, each frame from the flow whose deadline comes first ({})",
            flows.len(),
            flows.iter().map(flow_text).collect::<Vec<_>>().join("; ")
        ),
    };
    format!(
        "generated in the kernel by the backend's program: {what}{}",
        if flows.iter().any(|f| f.pace.is_some()) {
            "; paced by the program: a frame is sent at the first repetition at or after \
             its deadline, late frames back to back until the schedule is met (catch-up)"
        } else {
            ""
        }
    )
}

/// Watches the running generator until the flows' ends, the time limit, `stop` or every
/// flow's switch (a flow switched off ends alone), holding it while the run is paused;
/// then stops it. Returns what each flow sent and when the watch ended (before the stop,
/// which waits for the kernel).
fn run_generator(
    generator: &mut dyn strobe_io::kernel_frames::KernelGenerator,
    flows: &[KernelFlow],
    states: &mut [FlowState],
    clock: &Clock,
    opts: &RunOptions,
    stop: &AtomicBool,
    report: &mut PortReport,
) -> (
    Result<Vec<strobe_io::kernel_frames::KernelRun>, strobe_io::IoError>,
    u64,
) {
    let mut limit = opts
        .time_limit_ns
        .map(|ns| clock.now_ticks() + clock.ns_to_ticks(ns));
    loop {
        if stop.load(Ordering::Relaxed) {
            report.stopped_early = true;
            break;
        }
        if let Some(switches) = &opts.flow_switches {
            for (f, state) in states.iter_mut().enumerate() {
                if !state.stopped && switches.is_stopped(&state.report.name) {
                    state.stopped = true;
                    generator.end_flow(f);
                }
            }
        }
        if generator.done() {
            break;
        }
        if limit.is_some_and(|l| clock.now_ticks() >= l) {
            report.stopped_early = true;
            break;
        }
        if opts
            .pause
            .as_deref()
            .is_some_and(|p| p.load(Ordering::Relaxed))
        {
            generator.hold(true);
            let paused = hold_while_paused(clock, opts.pause.as_deref(), stop);
            generator.hold(false);
            limit = limit.map(|l| l + paused);
            report.paused_ns += clock.ticks_to_ns(paused);
            continue;
        }
        for (f, (state, flow)) in states.iter().zip(flows).enumerate() {
            if let Some(live) = &state.live {
                let frames = generator.generated(f);
                live.publish_tx(state.report.id, frames, flow.frame_bytes(frames));
            }
        }
        std::thread::sleep(KERNEL_POLL);
    }
    let watched_until = clock.now_ticks();
    (generator.stop(), watched_until)
}
