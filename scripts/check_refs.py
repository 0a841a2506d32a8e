#!/usr/bin/env python3
"""check_refs: the repository stands alone. Code and the texts it prints cite docs/ pages and
their heading anchors, never tags that exist nowhere in the repository (a requirement or
answer number in brackets, or an issue number). This checks, for every file under the given directories:

  1. no such tag appears;
  2. every cited `docs/<page>.md#<anchor>` names an existing page and a heading of it
     (anchors as docs/design/README.md#citing-these-pages defines them); a bare `#anchor`
     right after a citation (`docs/x.md#a, #b`) is checked against the same page.

Usage: check_refs.py ROOT DIR...        (e.g. . src python include scripts)
       check_refs.py --self-test        (the checker finds a planted tag and a dead anchor)
Exit 0 when clean, 1 with one line per finding.
"""
import os
import re
import sys
import tempfile

TAG = re.compile(r'\((?:FAQ )?[RA][0-9]+(?:[-–][RA]?[0-9]+)?(?:, ?[RA][0-9]+)*\)|\b[Ii]ssues? [0-9]+\b|\bFAQ R[0-9]+')
CITE = re.compile(r'docs/([A-Za-z0-9_/.-]+\.md)(#[A-Za-z0-9_-]+(?:,? ?#[A-Za-z0-9_-]+)*)?')
EXTS = ('.c', '.h', '.def', '.py', '.sh', '.txt', '.in', '.cmake')


def anchor_of(heading):
    """GitHub's rule: lower case, spaces to '-', punctuation other than '-' and '_' dropped."""
    h = heading.strip().lower()
    h = re.sub(r'[^\w\- ]', '', h, flags=re.UNICODE)
    return h.replace(' ', '-')


def anchors(path, cache={}):
    if path not in cache:
        found = set()
        try:
            with open(path, encoding='utf-8') as f:
                in_code = False
                for line in f:
                    if line.startswith('```'):
                        in_code = not in_code
                    m = None if in_code else re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
                    if m:
                        found.add(anchor_of(m.group(1)))
        except OSError:
            found = None
        cache[path] = found
    return cache[path]


def check_file(root, rel, out):
    try:
        with open(os.path.join(root, rel), encoding='utf-8') as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return
    for no, line in enumerate(text.splitlines(), 1):
        m = TAG.search(line)
        if m:
            out.append(f'{rel}:{no}: tag {m.group(0)!r} points outside the repository: cite a docs/ page')
        for c in CITE.finditer(line):
            page = os.path.join(root, 'docs', c.group(1))
            have = anchors(page)
            if have is None:
                out.append(f'{rel}:{no}: docs/{c.group(1)} does not exist')
                continue
            for a in re.findall(r'#([A-Za-z0-9_-]+)', c.group(2) or ''):
                if a not in have:
                    out.append(f'{rel}:{no}: docs/{c.group(1)} has no heading #{a}')


def run(root, dirs):
    out = []
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs[:] = [s for s in subdirs if s not in ('__pycache__', 'corpus')]
            for name in sorted(files):
                if name.endswith(EXTS) and name != 'check_refs.py':  # its own examples
                    check_file(root, os.path.relpath(os.path.join(base, name), root), out)
    return out


def self_test():
    with tempfile.TemporaryDirectory() as t:
        os.makedirs(os.path.join(t, 'docs'))
        os.makedirs(os.path.join(t, 'src'))
        with open(os.path.join(t, 'docs', 'page.md'), 'w') as f:
            f.write('# Page\n\n## The socket directory\n\n```\n# not a heading\n```\n')
        with open(os.path.join(t, 'src', 'ok.c'), 'w') as f:
            f.write('/* see docs/page.md#the-socket-directory, #page */\n')
        if run(t, ['src']):
            print('self-test: a clean tree was reported', file=sys.stderr)
            return 1
        with open(os.path.join(t, 'src', 'bad.c'), 'w') as f:
            # the planted tags are assembled so that this file holds none itself
            f.write('/* fix (%s3, %s10) */\n/* since %s 22 */\n/* docs/page.md#not-a-heading */\n'
                    '/* docs/missing.md */\n' % ('R', 'R', 'issue'))
        got = run(t, ['src'])
        if len(got) != 4:
            print('self-test: expected 4 findings, got:\n' + '\n'.join(got), file=sys.stderr)
            return 1
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out = run(argv[1], argv[2:])
    for line in out:
        print(line)
    return 1 if out else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
