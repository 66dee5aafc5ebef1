#!/usr/bin/env python3
"""What each segment costs a search: the median `timings_us.dense` of 300 queries (3 passes)
served read-only from hand-made collection directories under /tmp/searchd-suw/exp-NAME
(made from bench/search_under_writes.py's cached 1M collection by copying its manifest with
some segments or deleted sets left out; segment files hard-linked). Usage:
    python3 bench/segment_cost.py a b c
Results and the directories used: bench/results/segment-cost-synth1m.md.
"""
import json, http.client, subprocess, socket, time, sys
def port():
    s=socket.socket();s.bind(('127.0.0.1',0));p=s.getsockname()[1];s.close();return p
lines=[l.split(' ',2) for l in open('/tmp/searchd-suw/search.txt')][:300]
def run(coll):
    p=port(); srv=subprocess.Popen(['/work/main/target/release/searchd','serve','--collection',coll,'--addr',f'127.0.0.1:{p}','--read-only'],stdout=subprocess.DEVNULL,stderr=open('/tmp/cmp2.err','a'))
    t=time.time()
    while True:
        try:
            c=http.client.HTTPConnection('127.0.0.1',p);c.request('GET','/ready');r=c.getresponse();r.read()
            if r.status==200: break
        except OSError: pass
        if srv.poll() is not None: return 'exited'
        time.sleep(0.2)
    name=coll.rstrip('/').split('/')[-1]
    out=[]
    for rep in range(3):
        ts=[]
        for m,path,body in lines:
            b=json.loads(body)
            c.request('POST',f'/collections/{name}/search',body=json.dumps(b),headers={'Content-Type':'application/json'})
            r=c.getresponse(); d=json.loads(r.read())
            if r.status!=200: print(d); break
            ts.append(d['timings_us']['dense'])
        ts.sort(); out.append(ts[len(ts)//2])
    srv.terminate(); srv.wait()
    return out
for k in sys.argv[1:]:
    print(k, run('/tmp/searchd-suw/exp-'+k), flush=True)
