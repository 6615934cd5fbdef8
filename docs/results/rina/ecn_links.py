# ECN marks (and queue drops) per link of every simulated run, read with gdb
# from the engine's own counters (sim::LinkStats) when the collective counts
# them (exp::detail::count_ecn_marks). The results carry only the sums
# (ecn_marks_host, ecn_marks_switch); this names the links. Needs a build
# with full debug info: `make build DEBUG_INFO=-g` (the Makefile's default,
# -g1, has line tables only). Used by docs/results/rina.md
# ("Where the switch marks are"). Run one scenario with -j 1:
#
#   ECN_LINKS_OUT=out/marks.txt gdb -q -batch -x docs/results/rina/ecn_links.py \
#       --args ./build/ina sim SCENARIO.toml --out out/marks -j 1 --quiet
#
# out/marks.txt gets, per run ("RUN n", in the order the runs finish; match
# them to runs.json by the marks' sum), one line per link with a mark or a
# drop: "from->to marks=M pkts=P dropq=D".
import os

import gdb


class CountMarks(gdb.Breakpoint):
    def stop(self):
        frame = gdb.selected_frame()
        sim, graph = frame.read_var("sim"), frame.read_var("g")
        links = sim["links_"]["_M_impl"]
        first, n = links["_M_start"], int(links["_M_finish"] - links["_M_start"])
        nodes = graph["nodes_"]["_M_impl"]["_M_start"]

        def name(node):
            return nodes[int(node)]["name"].format_string().strip('"')

        with open(os.environ.get("ECN_LINKS_OUT", "ecn_links.txt"), "a") as out:
            out.write("RUN\n")
            for i in range(n):
                link, st = first[i], first[i]["st"]
                marks, drops = int(st["ecn_marked"]), int(st["drop_queue"])
                if marks or drops:
                    out.write("%s->%s marks=%d pkts=%d dropq=%d\n" % (
                        name(link["from"]), name(link["to"]), marks, int(st["packets"]), drops))
        return False


CountMarks("ina::exp::detail::count_ecn_marks")
gdb.execute("run")
