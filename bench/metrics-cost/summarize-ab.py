import re, statistics, sys
rows = {}
for line in open(__import__('os').path.join(__import__('os').path.dirname(__file__), 'results.txt')):
    f = line.split()
    if len(f) < 3: continue
    s, b = f[0], f[1].replace('heron-', '')
    kv = dict(x.split('=', 1) for x in f if '=' in x)
    d = rows.setdefault(s, {}).setdefault(b, {'pq': [], 'hb': [], 'n': []})
    d['pq'].append(float(kv['per_query']))
    if kv['handle_batch_per_query'] != 'n/a': d['hb'].append(float(kv['handle_batch_per_query']))
    d['n'].append(kv['completed'] + '/' + kv['lost'])
order = ['example-udp', 'root-udp', 'mix40-udp', 'big-udp', 'example-tcp', 'root-tcp']
def fmt(v): return f"{statistics.median(v):,.0f} ({min(v):,.0f}–{max(v):,.0f})" if v else "n/a"
print("| data set | transport | base instr/query, median (min–max) | new instr/query, median (min–max) | new/base | base handle_batch/query | new handle_batch/query | new/base (handle_batch) | runs |")
print("|---|---|---|---|---|---|---|---|---|")
for s in order:
    if s not in rows: continue
    b, n = rows[s].get('base'), rows[s].get('new')
    if not b or not n: continue
    ds, tr = s.rsplit('-', 1)
    r = statistics.median(n['pq']) / statistics.median(b['pq'])
    rh = f"{statistics.median(n['hb'])/statistics.median(b['hb']):.3f}" if b['hb'] and n['hb'] else "n/a"
    print(f"| {ds} | {tr.upper()} | {fmt(b['pq'])} | {fmt(n['pq'])} | {r:.3f} | {fmt(b['hb'])} | {fmt(n['hb'])} | {rh} | {len(b['pq'])}+{len(n['pq'])} |")
