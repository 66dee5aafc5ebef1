#!/usr/bin/env python3
"""Text upserts (1,000 passages without vectors, 10 requests of 100, HTTP) vs `searchd ingest --model`
embedding the same passages (its embed_seconds), per binary, interleaved new/old/new.
Usage: python bench/text_upserts_vs_ingest.py NEW_BIN OLD_BIN (needs bench/one_path_ab.py --prepare-only first).
Writes bench/results/one-path-text-upserts.json."""
import json, os, shutil, subprocess, time, urllib.request, signal, socket, sys
W="/work/main/bench/data/one-path-ab"; M=open("/work/main/.ci/.model-dir").read().strip()
up=[json.loads(l) for l in open(f"{W}/upsert-1000.jsonl")]
def post(u,b):
    r=urllib.request.Request(u,data=json.dumps(b).encode(),headers={"Content-Type":"application/json"})
    return json.loads(urllib.request.urlopen(r,timeout=600).read())
res={}
for label,b in [("new",sys.argv[1]),("old",sys.argv[2]),("new2",sys.argv[1])]:
    t0=time.time(); subprocess.run([b,"ingest","--docs",f"{W}/upsert-1000.jsonl","--model",M,"--out","/tmp/ing1k","--force","--json","/tmp/ing1k.json"],check=True,capture_output=True)
    ing=json.load(open("/tmp/ing1k.json"))["embed_seconds"]
    tc="/tmp/tcoll"; shutil.rmtree(tc,ignore_errors=True); shutil.copytree(f"{W}/ingest-1000",tc)
    s=socket.socket(); s.bind(("127.0.0.1",0)); port=s.getsockname()[1]; s.close()
    p=subprocess.Popen([b,"serve","--collection",f"t={tc}","--model",M,"--addr",f"127.0.0.1:{port}"],stderr=subprocess.DEVNULL)
    u=f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if urllib.request.urlopen(u+"/ready",timeout=1).status==200: break
        except Exception: time.sleep(0.1)
    t=time.time()
    for i in range(0,1000,100): post(u+"/collections/t/docs",{"docs":up[i:i+100],"wait":i+100>=1000})
    http=1000/(time.time()-t)
    p.send_signal(signal.SIGTERM); p.wait()
    res[label]={"http_docs_per_s":http,"ingest_embed_docs_per_s":1000/ing,"ratio":http/(1000/ing)}
    print(label,res[label],flush=True)
json.dump(res,open("/work/main/bench/results/one-path-text-upserts.json","w"),indent=1)
