"""Pictures of traced runs: trace."""

from __future__ import annotations

from pathlib import Path

import typer

from cutcheck.commands.common import app, out, user_errors


@app.command("trace")
@user_errors
def trace_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory of `cutcheck simulate --out DIR --trace`."),
    png: Path = typer.Option(..., "--png", help="Write the space-time diagram to this PNG file."),
    start: int | None = typer.Option(None, "--from", min=0, help="First scheduler step to draw."),
    end: int | None = typer.Option(None, "--to", min=0, help="Last scheduler step to draw."),
    checkpoint: int | None = typer.Option(None, "--checkpoint", help="Highlight this checkpoint's barriers and "
                                          "channel state (others faint); without --from/--to, zoom on it."),
    max_channels: int = typer.Option(48, "--max-channels", min=1, help="Refuse runs with more channels than this."),
) -> None:
    """Draw a traced run as a space-time diagram: a lane per subtask, buffers and barriers as arrows."""
    from cutcheck.reference.pictures.draw import draw_picture
    from cutcheck.reference.pictures.picture import build_picture

    picture = build_picture(run_dir, start=start, end=end, checkpoint=checkpoint, max_channels=max_channels)
    draw_picture(picture, png)
    for note in picture.notes:
        out.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    out.print(f"wrote {png}: {len(picture.lanes)} lanes, steps {picture.start}-{picture.end}, "
              f"{len(picture.data)} buffers, {len(picture.barriers)} barriers", markup=False, highlight=False)
