# scripts/dev/architecture.gp - docs/architecture.png: the rooms and an element's path through them
# (gnuplot, pngcairo; coordinates are pixels from the top left). make plots renders it.
set terminal pngcairo size 960,600 font "DejaVu Sans,10" background rgb "white" noenhanced
if (!exists("out")) out = "docs/architecture.png"
set output out
set xrange [0:960]
set yrange [600:0]
set lmargin 0
set rmargin 0
set tmargin 0
set bmargin 0
unset border
unset tics
unset key
set object 1 rect from 330,20 to 630,170 fc rgb "#e7f5ff" fs solid 1.0 border lc rgb "#1c7ed6" lw 1.5
set object 2 rect from 20,230 to 310,560 fc rgb "#fff4e6" fs solid 1.0 border lc rgb "#e8590c" lw 1.5
set object 3 rect from 35,310 to 295,364 fc rgb "#ffffff" fs solid 1.0 border lc rgb "#e8590c" lw 1.5
set object 4 rect from 35,384 to 295,438 fc rgb "#ffffff" fs solid 1.0 border lc rgb "#e8590c" lw 1.5
set object 5 rect from 35,458 to 295,512 fc rgb "#ffffff" fs solid 1.0 border lc rgb "#e8590c" lw 1.5
set object 6 rect from 340,430 to 620,560 fc rgb "#f3f0ff" fs solid 1.0 border lc rgb "#7048e8" lw 1.5
set object 7 rect from 650,230 to 940,560 fc rgb "#ebfbee" fs solid 1.0 border lc rgb "#2f9e44" lw 1.5
set object 8 rect from 665,458 to 925,512 fc rgb "#ffffff" fs solid 1.0 border lc rgb "#2f9e44" lw 1.5
set object 9 rect from 665,384 to 925,438 fc rgb "#ffffff" fs solid 1.0 border lc rgb "#2f9e44" lw 1.5
set object 10 rect from 665,310 to 925,364 fc rgb "#ffffff" fs solid 1.0 border lc rgb "#2f9e44" lw 1.5
set object 11 rect from 700,20 to 940,90 fc rgb "#f8f9fa" fs solid 1.0 border lc rgb "#495057" lw 1.5
set object 12 rect from 20,20 to 310,170 fc rgb "#fff9db" fs solid 1.0 border lc rgb "#f08c00" lw 1.5
set label "dispatcher/ (one daemon)" at 345,38 left font "DejaVu Sans Bold,10"
set label "service.c, workers.c, jobs.c, create_job.c:" at 345,60 left
set label "  typed handlers; codec.c packs replies" at 345,76 left
set label "state.c: pure state machine (leases, acks)" at 345,98 left
set label "journal: lib/journal.c + journal_record.c" at 345,120 left
set label "replanner.c, planning.c: the cut and share" at 345,142 left
set label "worker/ (one daemon per node)" at 35,248 left font "DejaVu Sans Bold,10"
set label "registration.c: heartbeats, task list" at 35,270 left
set label "jobs.c: the jobs it serves" at 35,290 left
set label "producer.c: lease a split, run" at 45,326 left
set label "groups [0, cut) on the backends" at 45,344 left
set label "outbox.c: messages per client" at 45,400 left
set label "rank, queues sized by drain rate" at 45,418 left
set label "stream.c: StreamElements, takes" at 45,474 left
set label "messages against client credit" at 45,492 left
set label "lib/channel.c (one interface)" at 355,448 left font "DejaVu Sans Bold,10"
set label "channel_grpc.c: data on the call" at 355,470 left
set label "channel_direct.c: data on a ticketed" at 355,490 left
set label "  TCP connection (lib/direct.c)" at 355,506 left
set label "control (credit) always on the call" at 355,528 left
set label "a new transport: one file" at 355,546 left tc rgb "#495057"
set label "client/ (libspillway, in the trainer)" at 665,248 left font "DejaVu Sans Bold,10"
set label "attach.c, session.c: CreateJob," at 665,270 left
set label "  heartbeats (acks), leases" at 665,286 left
set label "streams.c: one receive thread" at 675,474 left
set label "per worker; grants credit" at 675,492 left
set label "intake.c: check, claim, run the" at 675,400 left
set label "suffix [cut, n), place once" at 675,418 left
set label "assembler.c: the batches (prefetch" at 675,326 left
set label "buffer, exactly-once ledger)" at 675,344 left
set label "the trainer" at 715,40 left font "DejaVu Sans Bold,10"
set label "job.c: spw_job_next -> a batch" at 715,62 left
set label "(its own threads too: job.c)" at 715,78 left tc rgb "#495057"
set label "pipeline/ + ops/ (the engine)" at 35,38 left font "DejaVu Sans Bold,10"
set label "spec, op registry, sources, order" at 35,60 left
set label "element runner, CPU and GPU backends" at 35,80 left
set label "wire.c: ElementBatch without copies" at 35,100 left
set label "stream_msgs.c: the stream's requests" at 35,120 left
set label "ops/: the kernels (libjpeg-turbo, ...)" at 35,140 left
set label "lib/: rpc, direct, errors, tensors" at 35,158 left tc rgb "#495057"
set label "the source's bytes," at 172,201 left tc rgb "#d9480f"
set label "groups [0, cut)" at 172,217 left tc rgb "#d9480f"
set label "an element" at 388,590 left
set label "control (gRPC, unary)" at 528,590 left
set arrow from 165,364 to 165,384 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 165,438 to 165,458 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 295,485 to 340,485 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 620,485 to 665,485 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 795,458 to 795,438 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 795,384 to 795,364 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 905,310 to 905,90 head filled size 8,20 lw 3 lc rgb "#d9480f" front
set arrow from 165,170 to 165,310 head filled size 8,20 lw 2 lc rgb "#d9480f" dt 2 front
set arrow from 300,270 to 420,170 heads filled size 8,20 lw 1.5 lc rgb "#495057" front
set arrow from 660,270 to 560,170 heads filled size 8,20 lw 1.5 lc rgb "#495057" front
set arrow from 340,590 to 380,590 nohead lw 3 lc rgb "#d9480f" front
set arrow from 480,590 to 520,590 nohead lw 1.5 lc rgb "#495057" front
set label "register, heartbeats," at 345,206 left tc rgb "#495057"
set label "LeaseSplit" at 345,222 left tc rgb "#495057"
set label "CreateJob, heartbeats" at 470,246 left tc rgb "#495057"
set label "(acks), LeaseSplit" at 470,262 left tc rgb "#495057"
plot NaN notitle
