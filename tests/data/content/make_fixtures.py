"""Make the committed fixtures of tests/test_content.py (see README.md here).

Run from this directory: ``python make_fixtures.py``. Needs groff (PostScript),
perl's pod2man (troff) and gcc (ELF); the prose comes from Debian's
/usr/share/common-licenses (GPL-3 and Apache-2.0, which may be copied).
The markup sources are written here the way people write them; the
PostScript, the pod2man pages and the programs come from the real tools.
"""

from __future__ import annotations

import random
import re
import subprocess
import textwrap
from pathlib import Path

LICENSES = Path("/usr/share/common-licenses")


def paragraphs(name: str, skip: int, total: int) -> list[str]:
    """About ``total`` bytes of unwrapped paragraphs of a licence text."""
    text = (LICENSES / name).read_text()
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if len(p.split()) > 12]
    out: list[str] = []
    for p in paras[skip:]:
        out.append(p.replace("\\", "/"))
        if sum(map(len, out)) >= total:
            break
    return out


A = paragraphs("GPL-3", 3, 5000)
B = paragraphs("Apache-2.0", 2, 5000)


def words_marked(p: str, every: int, start: int, left: str, right: str) -> str:
    words = p.split()
    return " ".join(
        f"{left}{w}{right}" if i % every == start and w.isalpha() else w
        for i, w in enumerate(words)
    )


def sentences(p: str) -> str:
    return re.sub(r"([.;:]) +", r"\1\n", p)


def troff_escape(p: str) -> str:
    return p.replace("-", "\\-").replace("'", "\\(cq")


def ms(paras: list[str], title: str) -> str:
    body = "".join(
        ".PP\n" + sentences(words_marked(troff_escape(p), 13, 5, "\\fB", "\\fP")) + "\n"
        for p in paras
    )
    head = '.\\" ms source\n.nr PS 11\n.nr VS 13\n.TL\n' + title + "\n.AU\nA. Writer\n.NH\nTerms\n"
    return head + body


def man(paras: list[str], title: str) -> str:
    body = "".join(
        ".PP\n" + textwrap.fill(words_marked(troff_escape(p), 9, 2, "\\fI", "\\fR"), 65) + "\n"
        for p in paras
    )
    head = f'.TH {title.upper().replace(" ", "_")} 7 2024 "fixtures" "Licences"\n'
    return head + ".SH NAME\nterms \\- the terms\n.SH DESCRIPTION\n" + body


def pod(paras: list[str], name: str) -> str:
    return f"=head1 NAME\n\n{name} - terms\n\n=head1 DESCRIPTION\n\n" + "\n\n".join(paras) + "\n"


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
PREAMBLE = (
    "\\documentclass[11pt,a4paper]{article}\n"
    + "".join(
        f"\\usepackage{{{p}}}\n"
        for p in (
            "amsmath",
            "amssymb",
            "amsthm",
            "graphicx",
            "booktabs",
            "microtype",
            "xcolor",
            "hyperref",
            "cleveref",
            "enumitem",
            "geometry",
            "tikz",
        )
    )
    + "\\geometry{margin=2.5cm}\n\\hypersetup{colorlinks=true,linkcolor=blue,citecolor=teal}\n"
    + "".join(f"\\newcommand{{\\c{c}}}{{\\mathcal{{{c}}}}}\n" for c in LETTERS)
    + "".join(f"\\newcommand{{\\b{c}}}{{\\mathbf{{{c}}}}}\n" for c in LETTERS)
    + "".join(f"\\newcommand{{\\s{c}}}{{\\mathsf{{{c}}}}}\n" for c in LETTERS)
    + "\\newtheorem{theorem}{Theorem}[section]\n\\newtheorem{lemma}[theorem]{Lemma}\n"
    + "\\newtheorem{definition}[theorem]{Definition}\n"
    + "\\DeclareMathOperator*{\\argmax}{arg\\,max}\n\\DeclareMathOperator*{\\argmin}{arg\\,min}\n"
    + "\\newcommand{\\norm}[1]{\\left\\lVert#1\\right\\rVert}\n"
    + "\\newcommand{\\abs}[1]{\\left\\lvert#1\\right\\rvert}\n"
    + "\\makeatletter\n\\def\\@fnsymbol#1{\\ensuremath{\\ifcase#1\\or *\\or \\dagger\\or "
    "\\ddagger\\else\\@ctrerr\\fi}}\n\\makeatother\n"
)


def tex_escape(p: str) -> str:
    return re.sub(r"([%&$#_])", r"\\\1", p)


def latex(paras: list[str], title: str) -> str:
    body = "\n\n".join(
        textwrap.fill(words_marked(tex_escape(p), 11, 4, "\\emph{", "}"), 72) for p in paras
    )
    return (
        PREAMBLE
        + f"\\title{{{title}}}\n\\author{{A. Writer}}\n\\begin{{document}}\n\\maketitle\n"
        + "\\section{Terms}\\label{sec:terms}\n\n"
        + body
        + "\n\n% end of the terms\n\\bibliographystyle{plain}\n\\end{document}\n"
    )


def latex_other(paras: list[str], title: str) -> str:
    body = "\n\n".join(
        sentences(words_marked(tex_escape(p), 7, 1, "\\textit{", "}")) for p in paras
    )
    return (
        "\\documentclass{report}\n\\usepackage[T1]{fontenc}\n\\begin{document}\n"
        f"\\chapter*{{{title}}}\n% converted by hand\n{body}\n\\end{{document}}\n"
    )


def css(seed: int) -> str:
    rnd = random.Random(seed)
    rules = []
    for i in range(70):
        props = "; ".join(
            f"{p}: {rnd.randint(0, 40)}px"
            for p in rnd.sample(["margin", "padding", "top", "left", "width", "height"], 3)
        )
        rules.append(f".c-{i}-{rnd.choice(['nav', 'card', 'grid', 'btn'])} {{ {props}; }}")
    return "\n".join(rules)


SCRIPT = (
    "window.dataLayer = window.dataLayer || [];\nfunction gtag(){dataLayer.push(arguments);}\n"
    + "".join(
        f"document.querySelectorAll('.c-{i}').forEach(function (el) {{ "
        f"el.addEventListener('click', function () {{ el.classList.toggle('open-{i}'); }}); }});\n"
        for i in range(25)
    )
)


def html_site(paras: list[str], title: str) -> str:
    body = "\n".join(
        "<p>"
        + words_marked(p.replace("&", "&amp;").replace('"', "&quot;"), 10, 3, "<em>", "</em>")
        + "</p>"
        for p in paras
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        f"<style>\n{css(1)}\n</style>\n<script>\n{SCRIPT}</script>\n</head>\n<body>\n"
        '<nav class="c-1-nav"><a href="/">Home</a> <a href="/docs">Docs</a> '
        '<a href="/about">About</a></nav>\n<!-- generated page -->\n'
        f"<main><article><h1>{title}</h1>\n{body}\n</article></main>\n"
        '<footer class="c-2-grid">&copy; Example Org &middot; All rights reserved</footer>\n'
        "</body>\n</html>\n"
    )


def html_other(paras: list[str], title: str) -> str:
    body = "<br>\n".join(
        textwrap.fill(words_marked(p.replace("&", "&#38;"), 8, 6, "<b>", "</b>"), 90) for p in paras
    )
    return (
        "<html><head><title>" + title + "</title></head>\n"
        '<body bgcolor="#ffffff"><table width="100%"><tr><td valign="top">\n'
        f"<h2>{title}</h2>\n{body}\n</td></tr></table></body></html>\n"
    )


def c_program(paras: list[str], seed: int, extra: str = "") -> str:
    rnd = random.Random(seed)
    msgs = [s.strip() for p in paras for s in re.split(r"(?<=[.;]) ", p) if len(s) > 20]
    out = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", ""]
    out.append("static const char *messages[] = {")
    out += ["    " + '"' + m.replace('"', '\\"') + '",' for m in msgs]
    out.append("};")
    n = 120
    for i in range(n):
        a, b, c = rnd.randint(2, 97), rnd.randint(1, 1000), rnd.randint(0, len(msgs) - 1)
        first = extra if i == 0 else ""
        out.append(
            f"int step_{i}(int x) {{\n{first}    int y = x * {a} + {b};\n"
            f"    if (y % {a + 1} == 0) puts(messages[{c}]);\n"
            f"    return y ^ (x >> {rnd.randint(1, 7)});\n}}"
        )
    out.append("int main(int argc, char **argv) {\n    int x = argc;")
    out += [f'    if (argc > 1 && strcmp(argv[1], "s{i}") == 0) x = step_{i}(x);' for i in range(n)]
    out.append('    printf("%d\\n", x);\n    return 0;\n}')
    return "\n".join(out) + "\n"


def write(name: str, text: str) -> None:
    Path(name).write_text(text)


def main() -> None:
    write("troff-a.ms", ms(A, "The Terms"))
    write("troff-a.man", man(A, "The Terms"))
    for name, paras in (("a", A), ("b", B)):
        write(f"pod-{name}.pod", pod(paras, f"terms{name}"))
        with open(f"pod-{name}.1", "w") as f:
            subprocess.run(
                [
                    "pod2man",
                    "--center=fixtures",
                    "--release=1",
                    "--date=2024-01-01",
                    f"pod-{name}.pod",
                ],
                stdout=f,
                check=True,
            )
        Path(f"pod-{name}.pod").unlink()
    write("tex-a.tex", latex(A, "The Terms"))
    write("tex-a-other.tex", latex_other(A, "The Terms"))
    write("tex-b.tex", latex(B, "The Licence"))
    write("html-a.html", html_site(A, "The Terms"))
    write("html-a-other.html", html_other(A, "The Terms"))
    write("html-b.html", html_site(B, "The Licence"))
    # PostScript: groff's own prolog; ps-a-euro.ps also downloads the FreeEuro font.
    # (Debian's groff-base has the man macros only, so the pages are man pages.)
    write("ps-b.man", man(B, "The Licence"))
    write("ps-a-euro.man", man(A, "The Terms") + ".PP\nPrice: 10 \\[Eu] for the copy.\n")
    for src, dst in (
        ("troff-a.man", "ps-a.ps"),
        ("ps-b.man", "ps-b.ps"),
        ("ps-a-euro.man", "ps-a-euro.ps"),
    ):
        with open(dst, "w") as f:
            subprocess.run(["groff", "-Tps", "-man", src], stdout=f, check=True)
    Path("ps-b.man").unlink()
    Path("ps-a-euro.man").unlink()
    # ELF: version 2 of program a adds one statement at its start, shifting all code after it.
    write("prog-a1.c", c_program(A, 1))
    write("prog-a2.c", c_program(A, 1, '    if (x == 4242) puts("debug: step 0");\n'))
    write("prog-b.c", c_program(B, 2))
    for name in ("prog-a1", "prog-a2", "prog-b"):
        subprocess.run(["gcc", "-O1", "-o", name, f"{name}.c"], check=True)
        Path(f"{name}.c").unlink()  # remade by this script: not committed


if __name__ == "__main__":
    main()
