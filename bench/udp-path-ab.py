#!/usr/bin/env python3
"""A/B of two Heron UDP settings (--a, --b: lines of [server]) in one build
at fixed offered rates: server CPU (schedstat) per answered query, in
alternating trials; with --counts (under perf, so CPU figures are not
comparable) recvmmsg/sendmmsg calls and sendmmsg messages per query; with
--profile a `perf record -e cpu-clock -g` of each side. Server on CPU 0,
generator (dnsperf, or heron-bench blast) on CPU 1. The zones and query
files are those `heron-bench run` generates in --data. Prints one JSON line
per pair of trials. See docs/benchmarks/udp-socket-path.md."""
import glob, json, os, re, signal, subprocess, sys, time, argparse

ZONE_FILES = {
    'root': [('.', 'root.zone')],
    'mix40': [('edge.test.', 'edge.test.zone')],
    'big': [('big.test.', 'big.test.zone')],
}
READY = {'root': '.', 'mix40': 'edge.test.', 'big': 'big.test.'}

def runtime_ns(pid):
    total = 0
    for f in glob.glob(f'/proc/{pid}/task/*/schedstat'):
        try:
            total += int(open(f).read().split()[0])
        except OSError:
            pass
    return total

def start(binary, workload, port, extra, tag):
    d = f'{SCRATCH}/run-{tag}-{port}'
    os.makedirs(d, exist_ok=True)
    conf = f'[server]\nlisten = ["127.0.0.1:{port}"]\nworkers = 1\n{extra}\n'
    for origin, path in ZONES[workload]:
        conf += f'[[zone]]\norigin = "{origin}"\nfile = "{path}"\n'
    open(f'{d}/heron.toml', 'w').write(conf)
    log = open(f'{d}/server.log', 'w')
    p = subprocess.Popen(['taskset', '-c', '0', binary, 'serve', '--config', f'{d}/heron.toml'],
                         stdout=log, stderr=log, cwd=d)
    for _ in range(600):
        r = subprocess.run(['dig', '+short', '+tries=1', '+time=1', '-p', str(port), '@127.0.0.1',
                            READY[workload], 'SOA'], capture_output=True, text=True)
        if r.stdout.strip():
            return p
        time.sleep(0.2)
    p.kill()
    raise SystemExit(f'{binary} did not start')

def load(gen, workload, port, rate, seconds):
    if gen == 'dnsperf':
        cmd = ['taskset', '-c', '1', 'dnsperf', '-m', 'udp', '-s', '127.0.0.1', '-p', str(port),
               '-d', QUERIES[workload], '-c', '4', '-q', str(max(200, int(rate / 100))), '-T', '1',
               '-t', '2', '-l', str(seconds)]
        if rate:
            cmd += ['-Q', str(int(rate))]
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        completed = int(re.search(r'Queries completed:\s+(\d+)', out).group(1))
        sent = int(re.search(r'Queries sent:\s+(\d+)', out).group(1))
        return sent, completed
    cmd = [BENCH, 'blast', '--target', f'127.0.0.1:{port}', '--queries', QUERIES[workload],
           '--rate', str(int(rate)), '--duration', str(seconds), '--cpus', '1', '--json']
    out = json.loads(subprocess.run(cmd, capture_output=True, text=True).stdout)
    return out['blast']['sent'], out['blast']['answered']

def trial(p, gen, workload, port, rate, seconds, counts, profile=False, tag=''):
    perf = None
    if profile:
        perf = subprocess.Popen(['perf', 'record', '-q', '-e', 'cpu-clock', '-g', '-o', f'{SCRATCH}/prof-{workload}-{gen}-{int(rate)}-{tag}.data', '-p', str(p.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    if counts:
        perf = subprocess.Popen(['perf', 'record', '-q', '-o', f'{SCRATCH}/perf-{port}.data',
                                 '-e', 'syscalls:sys_exit_sendmmsg', '-e', 'syscalls:sys_exit_recvmmsg',
                                 '-p', str(p.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    c0 = runtime_ns(p.pid)
    sent, answered = load(gen, workload, port, rate, seconds)
    c1 = runtime_ns(p.pid)
    r = {'sent': sent, 'answered': answered, 'cpu_us_per_q': (c1 - c0) / 1e3 / max(answered, 1)}
    if profile:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    elif perf:
        perf.send_signal(signal.SIGINT)
        perf.wait()
        script = subprocess.run(['perf', 'script', '-i', f'{SCRATCH}/perf-{port}.data', '-F', 'event,trace'],
                                capture_output=True, text=True).stdout
        calls = {'sendmmsg': 0, 'recvmmsg': 0}
        msgs = 0
        received = 0
        for line in script.splitlines():
            m = re.search(r'sys_exit_(sendmmsg|recvmmsg).*0x([0-9a-f]+)', line)
            if not m:
                continue
            calls[m.group(1)] += 1
            v = int(m.group(2), 16)
            if v >= 1 << 63:
                v = 0
            if m.group(1) == 'sendmmsg':
                msgs += v
            else:
                received += v
        os.remove(f'{SCRATCH}/perf-{port}.data')
        r.update({'recvmmsg_per_q': calls['recvmmsg'] / max(received, 1),
                  'sendmmsg_per_q': calls['sendmmsg'] / max(received, 1),
                  'q_per_message': received / max(msgs, 1),
                  'q_per_batch': received / max(calls['recvmmsg'], 1)})
    return r

ap = argparse.ArgumentParser()
ap.add_argument('--bin', required=True)
ap.add_argument('--bench', required=True)
ap.add_argument('--data', default='target/bench-data')
ap.add_argument('--scratch', default='/tmp/heron-udp-ab')
ap.add_argument('--workloads', default='root,mix40,big')
ap.add_argument('--gens', default='dnsperf,blast')
ap.add_argument('--rates', default='20000,80000,120000')
ap.add_argument('--seconds', type=int, default=3)
ap.add_argument('--rounds', type=int, default=3)
ap.add_argument('--counts', action='store_true')
ap.add_argument('--profile', action='store_true')
ap.add_argument('--a', default='udp-segmentation = true')
ap.add_argument('--b', default='udp-segmentation = false')
args = ap.parse_args()
BENCH = args.bench
SCRATCH = args.scratch
os.makedirs(SCRATCH, exist_ok=True)
ZONES = {w: [(o, os.path.join(os.path.abspath(args.data), f)) for o, f in z] for w, z in ZONE_FILES.items()}
QUERIES = {w: os.path.join(os.path.abspath(args.data), 'queries', f'{w}.txt') for w in ZONES}
results = []
port = 41000 + os.getpid() % 1000
for wl in args.workloads.split(','):
    servers = {}
    for tag, extra in (('a', args.a), ('b', args.b)):
        port += 1
        servers[tag] = (start(args.bin, wl, port, extra, tag), port)
        load('dnsperf', wl, port, 20000, 2)
    try:
        for gen in args.gens.split(','):
            for rate in map(float, args.rates.split(',')):
                for rnd in range(args.rounds):
                    order = ['a', 'b'] if rnd % 2 == 0 else ['b', 'a']
                    row = {}
                    for tag in order:
                        p, pt = servers[tag]
                        time.sleep(0.3)
                        row[tag] = trial(p, gen, wl, pt, rate, args.seconds, args.counts, args.profile, tag)
                    rec = {'workload': wl, 'gen': gen, 'rate': rate, 'round': rnd, **row,
                           'ratio': row['a']['cpu_us_per_q'] / row['b']['cpu_us_per_q']}
                    results.append(rec)
                    print(json.dumps(rec), flush=True)
    finally:
        for p, _ in servers.values():
            p.terminate()
            p.wait()
