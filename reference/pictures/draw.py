"""Drawing a :class:`reference.pictures.picture.Picture` with matplotlib (Agg), and writing PNGs atomically."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cutcheck.model.errors import CutcheckError
from cutcheck.model.outputs import WRITTEN_BY, check_output_file
from cutcheck.reference.pictures.picture import (
    DATA,
    FAILURE,
    PERSISTED,
    Picture,
    colour,
)


def draw_picture(pic: Picture, path: str | Path) -> None:
    """Render ``pic`` and write it as PNG atomically (a temporary file, then a rename)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyArrowPatch

    y = {lane.label: lane.y for lane in pic.lanes}
    # Fixed sizes in inches (title, header, lanes, axis label, legend, footnote), so that a lane is
    # as tall in a 2-lane picture as in a 10-lane one.
    lanes_in = 0.6 * (max(y.values()) - min(y.values()) + 1.2)
    top, header, gap, bottom = 0.4, 0.75, 0.1, 1.45
    width = min(30.0, max(11.0, (pic.end - pic.start) / 14))
    height = top + header + gap + lanes_in + bottom
    fig = Figure(figsize=(width, height), dpi=90)
    FigureCanvasAgg(fig)
    left, right = 1.0 / width, 1 - 0.3 / width
    ax = fig.add_axes((left, bottom / height, right - left, lanes_in / height))
    head = fig.add_axes(((left, (bottom + lanes_in + gap) / height, right - left, header / height)), sharex=ax)

    def faint(cp: int) -> float:
        return 1.0 if pic.highlight in (None, cp) else 0.15

    def arrow(a: tuple[float, float], b: tuple[float, float], **kw: Any) -> None:
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=kw.pop("head", 7),
                                     shrinkA=0, shrinkB=0, **kw))

    # Lanes, banded by vertex so that a vertex's subtasks read as one group.
    vertices = list(dict.fromkeys(lane.vertex for lane in pic.lanes))
    for k, vid in enumerate(vertices):
        ys = [lane.y for lane in pic.lanes if lane.vertex == vid]
        if k % 2 == 0:
            ax.axhspan(min(ys) - 0.4, max(ys) + 0.4, color="#f3f3f3", zorder=0)
    for lane in pic.lanes:
        ax.axhline(lane.y, color="#c8c8c8", lw=0.8, zorder=0)
    ax.set_yticks([lane.y for lane in pic.lanes], [lane.label for lane in pic.lanes])
    ax.set_ylim(min(y.values()) - 0.6, max(y.values()) + 0.6)

    for a in pic.data:
        persisted = pic.highlight in a.persisted if pic.highlight is not None else bool(a.persisted)
        col, lw, z = (PERSISTED, 2.2, 3) if persisted else (DATA, 0.8, 2)
        style = ":" if a.restored_from is not None else "-"
        stop = a.end if a.end is not None else a.lost_at if a.lost_at is not None else pic.end
        if a.kind == "restored_input":  # read back by the consumer itself: along its own lane
            ax.plot([a.start, stop], [y[a.dst] - 0.12] * 2, color=col, lw=lw, ls=style, zorder=z)
            ax.plot([stop], [y[a.dst] - 0.12], marker=">", color=col, ms=4, zorder=z)
        else:
            arrow((a.start, y[a.src]), (stop, y[a.dst]), color=col, lw=lw, ls=style, zorder=z,
                  head=7 if a.end is not None else 1)
        if a.first is not None and a.end is not None and a.first != a.end:
            ax.plot([a.first], [y[a.dst]], "o", color=col, ms=2.5, zorder=z)
        if a.lost_at is not None:
            ax.plot([a.lost_at], [y[a.dst]], "x", color=FAILURE, ms=6, zorder=6)
    for b in sorted(pic.barriers, key=lambda b: b.cp == pic.highlight):
        alpha, ls = faint(b.cp), "--" if b.unaligned else "-"
        xs, ys = [p[0] for p in b.points], [y[p[1]] for p in b.points]
        kw: dict[str, Any] = {"color": colour(b.cp), "lw": 2.0, "alpha": alpha, "zorder": 4}
        if len(xs) > 2:  # a timed-out barrier travelled in order first: solid up to its last leg
            ax.plot(xs[:-1], ys[:-1], ls="-" if b.switched is not None else ls, **kw)
        if len(xs) > 1:
            arrow((xs[-2], ys[-2]), (xs[-1], ys[-1]), ls=ls, head=11 if b.arrived else 1, **kw)
        if b.switched is not None:
            k = max(i for i, p in enumerate(b.points) if p[0] == b.switched)
            ax.plot([xs[k]], [ys[k]], "o", mfc="white", color=colour(b.cp), ms=6, alpha=alpha, zorder=5)
        if b.aborted:
            ax.plot([xs[-1]], [ys[-1]], "X", color=colour(b.cp), ms=9, alpha=alpha, zorder=6, mec="black")
    for m in pic.markers:
        ax.plot([m.step], [y[m.lane]], "D", color=colour(m.cp), mec="black", mew=0.6, ms=7, alpha=faint(m.cp), zorder=5)

    # Header: one bar per checkpoint from trigger to completion or abort, the key to the colours.
    for s in pic.spans:
        row = s.cp % 2  # two rows, so that overlapping checkpoints stay apart
        head.plot([s.start, max(s.end, s.start + 1)], [row, row], color=colour(s.cp), lw=6, alpha=faint(s.cp),
                  solid_capstyle="butt")
        status = {"completed": "", "aborted": " ABORTED", "pending": " (pending)"}[s.status]
        head.text(max(s.start, pic.start), row + 0.3, f"cp {s.cp}{status}", fontsize=8, alpha=faint(s.cp),
                  color=FAILURE if s.status == "aborted" else "black", va="bottom", clip_on=True)
    head.set_ylim(-0.5, 2.5)
    head.set_yticks([])
    head.tick_params(labelbottom=False)
    head.set_title(pic.title, fontsize=11, loc="left")
    merged: dict[int, list[str]] = {}
    for v in pic.lines:
        for target in (ax, head):
            target.axvline(v.step, color=FAILURE, lw=1.6, ls="-" if v.kind == "failure" else "--", zorder=7)
        merged.setdefault(v.step, []).append(v.label)
    for step, labels in merged.items():
        right = step > pic.start + 0.6 * (pic.end - pic.start)  # keep the label inside the picture
        head.text(step, 2.2, f" {' → '.join(labels)} ", color=FAILURE, fontsize=8.5, va="top", fontweight="bold",
                  ha="right" if right else "left")
    ax.set_xlim(pic.start - 0.5, pic.end + 0.5)
    ax.set_xlabel("scheduler step")

    keys = ((DATA, 0.8, "-", ">", "data buffer"), (PERSISTED, 2.2, "-", "", "buffer persisted as channel state"),
            (PERSISTED, 2.2, ":", "", "restored channel state"), ("#444", 2, "-", "", "aligned barrier"),
            ("#444", 2, "--", "", "unaligned (priority) barrier"), ("#444", 0, "", "D", "snapshot (colour = checkpoint)"),
            ("#444", 0, "", "o", "alignment timeout (then priority)"), (FAILURE, 0, "", "x", "buffer dropped by the failure"),
            (FAILURE, 1.6, "-", "", "failure / restore"))
    legend = [Line2D([], [], color=c, lw=lw, ls=ls, marker=m, ms=5, mfc="white" if m == "o" else c, label=t)
              for c, lw, ls, m, t in keys]
    fig.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, 0.95 / height), ncol=5, fontsize=8,
               frameon=False)
    fig.text(left, 0.05 / height, "Data: from the step a buffer is transmitted (producer lane) to the step its last record is "
             "processed (consumer lane); a dot marks where a buffer processed in parts had its first part processed. "
             "Barrier: producer snapshot, sent in order, taken by the consumer (aligned), or snapshot to priority "
             "arrival (unaligned).", fontsize=7.5, color="#555555", va="bottom", wrap=True)
    save_png(fig, path)


def save_png(fig: Any, path: str | Path) -> None:
    """Write a matplotlib figure as PNG: to a temporary name first, then renamed into place, so a
    failed write never leaves half a picture; a bad path is one sentence (CutcheckError). The PNG
    names cutcheck as its Software, which is how a later run knows it may overwrite the file and
    that it may never overwrite any other."""
    path = check_output_file(Path(path), option="--png") or Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        if not path.parent.is_dir():
            raise CutcheckError(f"{path}: the folder {path.parent} does not exist; create it or choose another path.")
        fig.savefig(tmp, format="png", metadata={"Software": WRITTEN_BY})
        os.replace(tmp, path)
    except OSError as exc:
        raise CutcheckError(f"{path}: cannot write the picture ({exc.strerror or exc}); choose a writable path.") from None
    finally:
        tmp.unlink(missing_ok=True)
