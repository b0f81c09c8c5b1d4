//! Source lines by file and number, for fingerprints that survive edits elsewhere in a file.

use std::collections::HashMap;

/// Source files larger than this are not read (no C or C++ source is that large; a path a
/// hostile trace names could be a huge file).
const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Source files read so far (or found unreadable), each read once.
#[derive(Debug, Default)]
pub(crate) struct SourceLines {
    files: HashMap<String, Option<Lines>>,
}

/// A source file's lines as written, and with their whitespace runs collapsed.
#[derive(Debug)]
struct Lines {
    raw: Vec<String>,
    collapsed: Vec<String>,
    /// The file has `#line` directives: the compiler numbered some of its lines otherwise.
    renumbered: bool,
}

impl SourceLines {
    /// Line `line` (1-based) of `file`, its whitespace runs collapsed to one space and trimmed
    /// (re-indenting does not change it); `None` when the file cannot be read (built
    /// elsewhere, deleted), is not a regular file (a `#line` directive can name a FIFO or
    /// `/dev/zero`, which would make the audit wait or read forever) or is shorter.
    pub(crate) fn line(&mut self, file: &str, line: u32) -> Option<&str> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        self.lines(file)?.collapsed.get(index).map(String::as_str)
    }

    /// Line `line` (1-based) of `file` as written (columns count its bytes; a byte that is
    /// not UTF-8 is one `?`), as for [`line`](Self::line), to read the statement a code
    /// position's line and column point into. `None` also for a file with `#line`
    /// directives, whose lines the compiler numbered otherwise.
    pub(crate) fn raw_line(&mut self, file: &str, line: u32) -> Option<&str> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        let lines = self.lines(file)?;
        if lines.renumbered {
            return None;
        }
        lines.raw.get(index).map(String::as_str)
    }

    fn lines(&mut self, file: &str) -> Option<&Lines> {
        self.files
            .entry(file.to_owned())
            .or_insert_with(|| {
                let bytes = read_source(file)?;
                let raw = split_lines(&bytes);
                let collapsed = raw
                    .iter()
                    .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                    .collect();
                let renumbered = raw.iter().any(|l| {
                    let l = l.trim_start();
                    l.strip_prefix('#').is_some_and(|d| {
                        let d = d.trim_start();
                        d.starts_with("line") || d.starts_with(|c: char| c.is_ascii_digit())
                    })
                });
                Some(Lines {
                    raw,
                    collapsed,
                    renumbered,
                })
            })
            .as_ref()
    }
}

/// The lines of a source file as the compiler counts them (ended by `\n`, `\r\n` or a lone
/// `\r`), each byte that is not UTF-8 read as one `?` so that columns, which count bytes, stay
/// where they are (a lossy conversion would make each such byte three).
fn split_lines(bytes: &[u8]) -> Vec<String> {
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(_) => bytes
            .iter()
            .map(|&b| if b.is_ascii() { char::from(b) } else { '?' })
            .collect(),
    };
    let mut lines: Vec<String> = text
        .split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        .map(str::to_owned)
        .collect();
    if text.ends_with('\n') || text.ends_with('\r') {
        lines.pop();
    }
    lines
}

/// Whether the statement of source line `line` that holds column `column` (1-based, in
/// bytes) declares or initialises `name`: `name` there followed by `=`, `(`, `{` or `[`, not
/// reached through `.` or `->`; or, for an `object` (a `std::vector`, which allocates in its
/// methods), followed by `.` (`v.push_back(x)` after `std::vector<T> v;` on the line). On
/// `struct vec *v = malloc(…); v->data = calloc(…);` the `calloc` is not `v`'s.
pub(crate) fn statement_declares(line: &str, column: u32, name: &str, object: bool) -> bool {
    let (start, end) = statement_at(line, column);
    let statement = &line[start..end];
    occurrences(statement, name).any(|i| {
        let after = i + name.len();
        let before = statement[..i].trim_end();
        if before.ends_with('.') || before.ends_with("->") || before.ends_with("::") {
            return false;
        }
        let rest = statement[after..].trim_start();
        // A container's own method allocates its buffer: `v.push_back(x)`.
        (object && rest.starts_with('.'))
            || (rest.starts_with('=') && !rest.starts_with("=="))
            || rest.starts_with('(')
            || rest.starts_with('{')
            || rest.starts_with('[')
    })
}

/// Whether the statement at column `column` of `line`, which declares `name` (see
/// [`statement_declares`]), initialises it with the allocation there as its value (as
/// [`assigned_target`] checks an assignment's): `long *p = (long *)malloc(n)` or `Node
/// *n(new Node)`, not `long *p = (long *)malloc(n) + 1` or `W *w = wrap(calloc(…))`.
pub(crate) fn declared_value(line: &str, column: u32, name: &str, callee: Option<&str>) -> bool {
    let (start, end) = statement_at(line, column);
    let statement = &line[start..end];
    let Some(at) = usize::try_from(column)
        .ok()
        .and_then(|c| c.checked_sub(1 + start))
    else {
        return false;
    };
    let s = statement.as_bytes();
    occurrences(statement, name).any(|i| {
        let after = i + name.len();
        let gap = statement[after..].len() - statement[after..].trim_start().len();
        let open = after + gap;
        match s.get(open) {
            Some(b'=') if s.get(open + 1) != Some(&b'=') => at
                .checked_sub(open + 1)
                .is_some_and(|a| is_the_value(&statement[open + 1..], a, callee)),
            Some(b'(' | b'{') => closing(statement, open).is_some_and(|close| {
                at > open
                    && at <= close
                    && is_the_value(&statement[open + 1..close], at - open - 1, callee)
            }),
            _ => false,
        }
    })
}

/// Where `name` occurs in `statement` as a whole word (byte offsets): `v` in `v = x` and
/// `*v`, not in `vv` or `v2`.
fn occurrences<'a>(statement: &'a str, name: &'a str) -> impl Iterator<Item = usize> + 'a {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let s = statement.as_bytes();
    statement.match_indices(name).filter_map(move |(i, _)| {
        let after = i + name.len();
        let joined = (i > 0 && word(s[i - 1])) || s.get(after).is_some_and(|&b| word(b));
        (!joined).then_some(i)
    })
}

/// The bytes of source file `path`: a regular file, read through one handle (checked before
/// it is opened, so a FIFO is never opened and waited on, and again after, so it cannot be
/// swapped in between), at most [`MAX_SOURCE_BYTES`] (files in `/proc` say they are empty and
/// are not: `/proc/self/pagemap` reads for hundreds of GiB).
fn read_source(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_SOURCE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() as u64 <= MAX_SOURCE_BYTES).then_some(bytes)
}

/// What the statement of source line `line` holding column `column` (1-based, in bytes)
/// assigns to: a plain name (`g_data` of `g_data = malloc(n);`) or a member reached from one
/// through `.` and `->` (`v->data` of `v->data = calloc(…)`, `this->cells`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Assigned<'a> {
    /// The first name: a variable (`v`).
    pub root: &'a str,
    /// The members after it, each with the step that reaches it (`->`, `data`).
    pub steps: Vec<(Step, &'a str)>,
}

/// A step of an [`Assigned`] path to its next name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `a.b`: `a` is an object.
    Dot,
    /// `a->b`: `a` is a pointer to one.
    Arrow,
}

impl Assigned<'_> {
    /// The target as written, without spaces: `v->data`.
    pub(crate) fn path(&self) -> String {
        let mut path = self.root.to_owned();
        for (step, name) in &self.steps {
            path.push_str(match step {
                Step::Dot => ".",
                Step::Arrow => "->",
            });
            path.push_str(name);
        }
        path
    }
}

/// The target of the assignment the statement at `column` of `line` is ([`Assigned`]), when
/// it is a plain name or a path of member names. Not an element (`a[i] = …`, `a[i].p = …`: which
/// one is not written), a dereference, a compound assignment or a declaration (`double *y =
/// …`, which DWARF's declaring line names).
pub(crate) fn assigned_target<'a>(
    line: &'a str,
    column: u32,
    callee: Option<&str>,
) -> Option<Assigned<'a>> {
    let (start, end) = statement_at(line, column);
    let statement = &line[start..end];
    let bytes = statement.as_bytes();
    let mut depth = 0i32;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            // A `for` header's step and body: `i++) a = malloc(1)` leaves a `)` unmatched.
            b'=' if depth <= 0 => {
                let prev = i.checked_sub(1).map(|p| bytes[p]);
                let next = bytes.get(i + 1).copied();
                if next == Some(b'=') || matches!(prev, Some(b'=' | b'!' | b'<' | b'>')) {
                    return None;
                }
                let before = &statement[..i];
                let after_bracket = before.rfind([')', '(', '{', '}']).map_or(0, |b| b + 1);
                let at = usize::try_from(column)
                    .unwrap_or(usize::MAX)
                    .saturating_sub(1)
                    .saturating_sub(start)
                    .checked_sub(i + 1)?;
                if !is_the_value(&statement[i + 1..], at, callee) {
                    return None;
                }
                // `if (c) a->x = …; else b->y = …;` on one line.
                let target = before[after_bracket..].trim_start();
                let target = ["else ", "do "]
                    .iter()
                    .find_map(|k| target.strip_prefix(k))
                    .unwrap_or(target);
                return member_path(target);
            }
            _ => {}
        }
    }
    None
}

/// The data member a constructor's member initializer at column `column` of `line` sets to
/// the allocation there, as the path `this->NAME`: `cells(new double[n]())` or `cells{…}` after
/// the initializer list's `:` or `,`, or first on its line (an initializer list spread over
/// lines). The allocation must be the initializer's value (as for an assignment): not an
/// argument of another call in it, and not a constructor's arguments (`items(n)` of a
/// `std::vector`).
pub(crate) fn initialized_member<'a>(
    line: &'a str,
    column: u32,
    callee: Option<&str>,
) -> Option<Assigned<'a>> {
    let at = usize::try_from(column).ok()?.checked_sub(1)?;
    // The outermost parenthesis or brace open at `at` (casts inside it are the value's).
    let mut open: Vec<usize> = Vec::new();
    for (i, c) in line.char_indices().take_while(|&(i, _)| i < at) {
        match c {
            '(' | '{' => open.push(i),
            ')' | '}' => {
                open.pop()?;
            }
            _ => {}
        }
    }
    let &group = open.first()?;
    let close = closing(line, group)?;
    let before = line[..group].trim_end();
    let name_at = before
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    let name = &before[name_at..];
    let keyword = matches!(
        name,
        "if" | "while" | "for" | "switch" | "return" | "sizeof" | "alignof" | "decltype"
    );
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() || keyword {
        return None;
    }
    let lead = line[..name_at].trim_end();
    let listed =
        lead.is_empty() || lead.ends_with(',') || (lead.ends_with(':') && !lead.ends_with("::"));
    let value = &line[group + 1..close];
    // At the group's closing parenthesis: g++'s place for a default member initializer
    // (`long *e = new long[8]();` in the class), not this initializer's value.
    let inside = at < close;
    (listed && inside && is_the_value(value, at - group - 1, callee)).then(|| Assigned {
        root: "this",
        steps: vec![(Step::Arrow, name)],
    })
}

/// The variable or member path whose address the allocating call at column `column` of
/// `line` takes to store the block in: `posix_memalign((void **)&accs, 64, n)` gives `accs`,
/// `posix_memalign(&box.vals, …)` `box.vals`.
pub(crate) fn out_parameter_target<'a>(
    line: &'a str,
    column: u32,
    callee: Option<&str>,
) -> Option<Assigned<'a>> {
    if callee.is_some_and(|c| c != "posix_memalign") {
        return None;
    }
    let mut at = usize::try_from(column).ok()?.checked_sub(1)?;
    if line.get(at..)?.starts_with('(') {
        // g++ (C++) places the call at its parenthesis.
        at = line[..at]
            .trim_end()
            .len()
            .checked_sub("posix_memalign".len())?;
    }
    let call = line.get(at..)?.strip_prefix("posix_memalign")?.trim_start();
    let args = call.strip_prefix('(')?;
    let mut depth = 0i32;
    let end = args.find(|c: char| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        depth < 0 || (c == ',' && depth == 0)
    })?;
    let mut first = args[..end].trim();
    // Casts: `(void **)&p`.
    while let Some(inner) = first.strip_prefix('(') {
        let close = closing(first, 0)?;
        if !inner[..close - 1].trim_end().ends_with('*') {
            return None;
        }
        first = first[close + 1..].trim_start();
    }
    member_path(first.strip_prefix('&')?)
}

/// The container whose growing method the statement at column `column` of `line` calls
/// (the column on the method's name, or on its parenthesis, as clang and g++ place it):
/// `accs` of `accs.resize(n)`, `st.hits` of `st.hits.assign(8, 0)`, `v` of
/// `v.push_back(x)`. Its elements are the block (a vector's storage).
pub(crate) fn grown_container<'a>(
    line: &'a str,
    column: u32,
    grown_by: Option<&str>,
) -> Option<Assigned<'a>> {
    const GROWING: [&str; 8] = [
        "resize",
        "reserve",
        "assign",
        "push_back",
        "emplace_back",
        "insert",
        "emplace",
        "shrink_to_fit",
    ];
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let at = usize::try_from(column).ok()?.checked_sub(1)?;
    let (start, end) = if line.get(at..)?.starts_with('(') {
        let before = line[..at].trim_end();
        (
            before.rfind(|c| !word(c)).map_or(0, |i| i + 1),
            before.len(),
        )
    } else {
        if line[..at].ends_with(word) {
            return None;
        }
        (
            at,
            at + line[at..].find(|c| !word(c)).unwrap_or(line.len() - at),
        )
    };
    let method = &line[start..end];
    // The vector method that allocated must be the one written (not the constructor of a
    // braced temporary g++ places at `rows.push_back({…})`'s parenthesis).
    if !GROWING.contains(&method)
        || grown_by != Some(method)
        || !line[end..].trim_start().starts_with('(')
    {
        return None;
    }
    let receiver = line[..start].trim_end().strip_suffix('.')?.trim_end();
    let path = |c: char| word(c) || matches!(c, '.' | '-' | '>' | ' ');
    let from = receiver.rfind(|c| !path(c)).map_or(0, |i| i + 1);
    member_path(&receiver[from..])
}

/// Whether the expression `rhs` (what follows an assignment's `=`) is the allocation whose
/// code position is at its byte `at`, maybe cast or parenthesized: a `new` expression, or a
/// call (`malloc(…)`, `std::vector<long>(n)`) with `at` on its name, its parentheses or
/// before (compilers place a call at its name or its parenthesis). Not an argument of another
/// call (`wrap(malloc(8))`), an operand (`(char *)malloc(n) + 16`, a pointer past the block's
/// start; `c ? malloc(8) : q`) or a subscript. With `callee` (`malloc`, `new`: what the call
/// instruction at the allocation calls, as written in source), the expression must call it.
fn is_the_value(rhs: &str, at: usize, callee: Option<&str>) -> bool {
    let lead = rhs.len() - rhs.trim_start().len();
    let (rhs, at) = (rhs.trim(), at.saturating_sub(lead));
    if let Some(inner) = rhs.strip_prefix('(') {
        let Some(close) = closing(rhs, 0) else {
            return false;
        };
        let rest = &rhs[close + 1..];
        if inner[..close - 1].trim_end().ends_with('*') {
            // A cast: `(T *)malloc(…)`.
            return is_the_value(rest, at.saturating_sub(close + 1), callee);
        }
        // A parenthesized expression, nothing after it.
        return rest.trim().is_empty()
            && at > 0
            && is_the_value(&inner[..close - 1], at - 1, callee);
    }
    for cast in ["static_cast<", "reinterpret_cast<"] {
        if let Some(open) = rhs.starts_with(cast).then(|| rhs.find('(')).flatten() {
            let Some(close) = closing(rhs, open) else {
                return false;
            };
            return rhs[close + 1..].trim().is_empty()
                && at > open
                && is_the_value(&rhs[open + 1..close], at - open - 1, callee);
        }
    }
    if keyword_at(rhs, 0, "new") {
        // `new T[n + 1]()`: no arithmetic or comma outside its brackets and parentheses, and
        // no other `new` inside it before `at` (`new Wrapper(new long[8]())`: which of the
        // two is at `at` cannot be told when the compiler places the outer one at its last
        // parenthesis).
        let mut depth = 0i32;
        for (i, c) in rhs.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' => depth -= 1,
                '+' | '-' if depth == 0 && !rhs[i + 1..].starts_with('>') => return false,
                ',' if depth == 0 => return false,
                'n' if i > 0 && i <= at && keyword_at(rhs, i, "new") => return false,
                _ => {}
            }
        }
        // g++ places a class's default member initializer at the end of the constructor's
        // last initializer: a position past this expression is not its.
        return at < rhs.len() && callee.is_none_or(|c| c == "new");
    }
    // A call: a (qualified, maybe templated) name, its arguments, nothing after.
    let name = rhs
        .find(|c: char| {
            !(c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '<' | '>' | ' ' | ',' | '*'))
        })
        .unwrap_or(rhs.len());
    if name == 0 || rhs.as_bytes()[0].is_ascii_digit() || !rhs[name..].starts_with('(') {
        return false;
    }
    let Some(close) = closing(rhs, name) else {
        return false;
    };
    // The function the call instruction calls must be the one written here: gcc places
    // `wrap(malloc(n))`'s `malloc` at `wrap`, and a macro hides what it expands to.
    let called = rhs[..name].split('<').next().unwrap_or("").trim_end();
    let called = called.rsplit([':', ' ']).next().unwrap_or("");
    callee.is_none_or(|c| c == called)
        && rhs[close + 1..].trim().is_empty()
        && (at <= name || at == close)
}

/// Whether the keyword `word` starts at byte `at` of `text` (not part of a longer name).
fn keyword_at(text: &str, at: usize, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text[at..].starts_with(word)
        && !text[at + word.len()..].starts_with(part)
        && !text[..at].ends_with(part)
}

/// The byte of the `)` or `}` that closes the `(` or `{` at byte `open` of `line` (the two
/// kinds counted alike: a C source balances them).
fn closing(line: &str, open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in line.char_indices().skip_while(|&(i, _)| i < open) {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `target` read as names joined by `.` or `->` (spaces around each allowed).
fn member_path(target: &str) -> Option<Assigned<'_>> {
    let identifier = |s: &str| {
        !s.is_empty()
            && s.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
            && !s.as_bytes()[0].is_ascii_digit()
    };
    let mut names = Vec::new();
    let mut step = None;
    let mut rest = target.trim();
    loop {
        let cut = rest.find(['.', '-']).unwrap_or(rest.len());
        let name = rest[..cut].trim();
        if !identifier(name) {
            return None;
        }
        names.push((step, name));
        let tail = &rest[cut..];
        let (next, len) = if tail.starts_with('.') {
            (Step::Dot, 1)
        } else if tail.starts_with("->") {
            (Step::Arrow, 2)
        } else if tail.is_empty() {
            break;
        } else {
            // `a -= …` reads as a `-` here; `*p`, `x[i]` and `T *v` fail as names above.
            return None;
        };
        step = Some(next);
        rest = &tail[len..];
    }
    let mut names = names.into_iter();
    let (_, root) = names.next()?;
    let steps = names.map(|(s, n)| Some((s?, n))).collect::<Option<_>>()?;
    Some(Assigned { root, steps })
}

/// `first` and `rest` as one line when `rest` continues the assignment or initialisation
/// `first` ends with (`double *y =`, then `    malloc(n);`), with `column` of `rest` moved
/// onto it.
pub(crate) fn continued(first: &str, rest: &str, column: u32) -> Option<(String, u32)> {
    // Without a trailing comment (`// later: acc =` is no assignment).
    let head = first.split("//").next().unwrap_or(first);
    let head = match (head.find("/*"), head.rfind("*/")) {
        (Some(open), _) if head[open..].find("*/").is_none() => &head[..open],
        (_, Some(close)) if head[close + 2..].trim().is_empty() => {
            &head[..head[..close].rfind("/*").unwrap_or(close)]
        }
        _ => head,
    };
    let head = head.trim_end();
    let assigns = head.strip_suffix('=').is_some_and(|h| {
        !h.ends_with(['=', '!', '<', '>', '+', '-', '*', '/', '%', '&', '|', '^'])
    });
    let offset = u32::try_from(head.len() + 1).ok()?;
    assigns.then(|| (format!("{head} {rest}"), column.saturating_add(offset)))
}

/// Where the statement of `line` holding column `column` starts (a byte of `line`), also
/// after a block's `{` or `}` before it (`void init(T *g) { g->data = …`).
pub(crate) fn statement_start(line: &str, column: u32) -> usize {
    let start = statement_at(line, column).0;
    let at = usize::try_from(column)
        .unwrap_or(usize::MAX)
        .saturating_sub(1)
        .min(line.len());
    let brace = line
        .get(..at)
        .and_then(|l| l.rfind(['{', '}']))
        .map_or(0, |i| i + 1);
    start.max(brace)
}

/// The byte range of the statement of `line` that holds column `column` (1-based): cut at
/// every `;`, and after a `)` that closes a parenthesis opened before the statement (a `for`
/// or `if` header's).
fn statement_at(line: &str, column: u32) -> (usize, usize) {
    let bytes = line.as_bytes();
    let at = usize::try_from(column)
        .unwrap_or(usize::MAX)
        .saturating_sub(1)
        .min(bytes.len().saturating_sub(1));
    let (mut start, mut depth) = (0, 0i32);
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            // Every `;` ends one: a function body written on one line holds statements, and
            // the parts of a `for` or `if (init; cond)` header are apart from what follows.
            b';' if i >= at => return (start, i),
            b';' => (start, depth) = (i + 1, 0),
            b'(' => depth += 1,
            // The `)` closing a `for` header before `at` ends its step: `it = next) r =
            // new …` is the body's `r = new …`.
            b')' if depth == 0 && i < at => start = i + 1,
            b')' => depth -= 1,
            _ => {}
        }
    }
    (start, bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_of_an_allocation_declares_its_variable() {
        let line = "  struct vec *v = malloc(sizeof *v); v->data = calloc(8, sizeof(long));";
        let malloc = line.find("malloc").unwrap() as u32 + 1;
        let calloc = line.find("calloc").unwrap() as u32 + 1;
        assert!(statement_declares(line, malloc, "v", false));
        assert!(!statement_declares(line, calloc, "v", false));
        assert!(statement_declares(
            "std::vector<Acc> accs(n);",
            18,
            "accs",
            false
        ));
        assert!(statement_declares(
            "Node *node{new Node};",
            12,
            "node",
            false
        ));
        assert!(statement_declares(
            "double *y = f(a, b); // y",
            13,
            "y",
            false
        ));
        // Compared, a member, another name that contains it.
        assert!(!statement_declares("if (y == malloc(8))", 10, "y", false));
        assert!(!statement_declares("s.y = malloc(8);", 7, "y", false));
        assert!(!statement_declares("long *yy = malloc(8);", 12, "y", false));
        // A column past the end is the last statement's.
        assert!(statement_declares(
            "p = g(); q = malloc(1);",
            99,
            "q",
            false
        ));
        // A body on one line; a `for` header's semicolons do not end a statement.
        let body = "Vec *f() { Vec *v = new Vec; v->data = new long[8](); return v; }";
        let second = body.rfind("new").unwrap() as u32 + 1;
        assert!(!statement_declares(body, second, "v", false));
        assert!(statement_declares(body, 20, "v", false));
        let for_loop = "for (int i = 0; i < 1; i++) a = malloc(1);";
        assert!(statement_declares(for_loop, 36, "a", false));
        // C++17's `if (init; cond)`: the declaration is not the allocation's statement.
        let init = "if (Quad *q = nullptr; (r = new Pair[4]) != nullptr) {}";
        let new_at = init.find("new").unwrap() as u32 + 1;
        assert!(!statement_declares(init, new_at, "q", false));
        let step = "for (Quad *it = nullptr; !it; it = next(it)) r2 = new Pair[4];";
        let new_at = step.find("new").unwrap() as u32 + 1;
        assert!(!statement_declares(step, new_at, "it", false));
        assert_eq!(
            assigned_target(step, new_at, None).map(|a| a.path()),
            Some("r2".into())
        );
        // A vector declared, then grown, on one line.
        let grown = "std::vector<Acc> dst; for (int i = 0; i < 8; i++) dst.push_back(a[i]);";
        let push = grown.find("push_back").unwrap() as u32 + 1;
        assert!(statement_declares(grown, push, "dst", true));
        assert!(!statement_declares(grown, push, "dst", false));
    }

    #[test]
    fn the_target_of_an_assignment_is_a_name_or_a_member_path() {
        let target =
            |line: &str, column: u32| assigned_target(line, column, None).map(|a| a.path());
        let named = |path: &str| Some(path.to_owned());
        assert_eq!(target("  g_data = malloc(n * 8);", 12), named("g_data"));
        assert_eq!(
            target("x = malloc(1); acc = calloc(4, 8);", 22),
            named("acc")
        );
        assert_eq!(target("x = malloc(1); acc = calloc(4, 8);", 5), named("x"));
        assert_eq!(
            target("for (int i = 0; i < 4; i++) a = malloc(8);", 34),
            named("a")
        );
        assert_eq!(target("{ xx = malloc(64); }", 8), named("xx"));
        assert_eq!(target("t.items = malloc(8);", 12), named("t.items"));
        assert_eq!(target("p->next = malloc(8);", 12), named("p->next"));
        assert_eq!(
            target("if (c) s->b = f(); else s->a = malloc(8);", 33),
            named("s->a")
        );
        assert_eq!(
            assigned_target("  this -> grid . cells = new double[n];", 30, None),
            Some(Assigned {
                root: "this",
                steps: vec![(Step::Arrow, "grid"), (Step::Dot, "cells")],
            })
        );
        // The allocation is the value assigned, maybe cast.
        let value = |line: &str| target(line, line.find("malloc").unwrap() as u32 + 1);
        assert_eq!(value("p = (long *)malloc(8);"), named("p"));
        assert_eq!(value("p = static_cast<long *>(malloc(8));"), named("p"));
        assert_eq!(
            value("h = (struct hdr *)(malloc(sizeof *h + n));"),
            named("h")
        );
        assert_eq!(value("p = c ? malloc(8) : q;"), None);
        assert_eq!(value("p = wrap(malloc(8));"), None);
        assert_eq!(value("p = (char *)malloc(64) + 16;"), None);
        assert_eq!(value("p = 16 + (char *)malloc(64);"), None);
        assert_eq!(value("p = table[malloc(8) != 0];"), None);
        let outer = |line: &str, at: &str| {
            let column = line.find(at).unwrap() as u32 + 1;
            target(line, column)
        };
        assert_eq!(outer("h->w = new W(new long[8]());", "new long"), None);
        assert_eq!(outer("h->w = new W(new long[8]());", "())"), None);
        assert_eq!(
            outer("a->w = new W(0), b->buf = new long[8]();", "new long"),
            None
        );
        assert_eq!(value("p = (*get)(malloc(8));"), None);
        assert_eq!(
            target("p->v = new double[n + 1];", 8),
            named("p->v"),
            "the count's arithmetic is the allocation's"
        );
        // g++ places `new T[n]()` at its last parenthesis, a call at its parenthesis.
        assert_eq!(target("c = new double[n]();", 19), named("c"));
        assert_eq!(target("c = malloc (8);", 12), named("c"));
        assert_eq!(target("c = malloc(sizeof(long));", 19), None);
        assert_eq!(target("p = (new Node) + 1;", 6), None);
        // The function called must be the one the call instruction calls (gcc places a call
        // nested in another at the outer one; a macro hides its expansion).
        let called = |line: &str, column: u32, callee: &str| {
            assigned_target(line, column, Some(callee)).map(|a| a.path())
        };
        assert_eq!(
            called("g = wrap(aligned_alloc(64, 64));", 5, "aligned_alloc"),
            None
        );
        assert_eq!(called("p->m = ALLOC_SKIP(64);", 8, "malloc"), None);
        assert_eq!(
            called("p->m = (long *)malloc(64);", 16, "malloc"),
            named("p->m")
        );
        assert_eq!(
            called("p->m = std::malloc(64);", 8, "malloc"),
            named("p->m")
        );
        assert_eq!(
            called("p->m = (long *) malloc (64);", 17, "malloc"),
            named("p->m")
        );
        assert_eq!(called("p->m = new long[8];", 8, "new"), named("p->m"));
        assert_eq!(
            called("p->m = ::operator new(64);", 8, "new"),
            named("p->m")
        );
        assert_eq!(called("p->m = new long[8];", 8, "malloc"), None);
        assert_eq!(
            out_parameter_target("posix_memalign(&p, 64, 64);", 1, Some("malloc")),
            None
        );
        // A constructor's member initializers.
        let init = "Grid(long n) : n(n), cells(new double[n]()) {}";
        let new_at = init.find("new").unwrap() as u32 + 1;
        assert_eq!(assigned_target(init, new_at, None), None);
        assert_eq!(
            initialized_member(init, new_at, None).map(|a| a.path()),
            named("this->cells")
        );
        let init = "    , buf{static_cast<char *>(malloc(n))}";
        let malloc_at = init.find("malloc").unwrap() as u32 + 1;
        assert_eq!(
            initialized_member(init, malloc_at, None).map(|a| a.path()),
            named("this->buf")
        );
        let init = "      cells(new double[n])";
        assert_eq!(
            initialized_member(init, 13, None).map(|a| a.path()),
            named("this->cells")
        );
        // The address a `posix_memalign` call stores the block at.
        let out = |line: &str| {
            let at = line.find("posix_memalign").unwrap() as u32 + 1;
            out_parameter_target(line, at, None).map(|a| a.path())
        };
        assert_eq!(
            out("if (posix_memalign((void **)&accs, 64, n) != 0)"),
            named("accs")
        );
        assert_eq!(out("posix_memalign(&box.vals, 64, 64);"), named("box.vals"));
        assert_eq!(
            out("posix_memalign( (void **) & p->v , 64, 64);"),
            named("p->v")
        );
        assert_eq!(out("posix_memalign(pp, 64, 64);"), None);
        assert_eq!(
            out_parameter_target("posix_memalign (&p, 64, 64);", 16, None).map(|a| a.path()),
            named("p")
        );
        assert_eq!(out("posix_memalign(&a[i], 64, 64);"), None);
        assert_eq!(out("posix_memalign((void **)(&p + 1), 64, 64);"), None);
        for other in [
            // Arguments of a call, a constructor's, a call in a body, a qualified call.
            "  : cells(wrap(new double[n])) {}",
            "  : items(n * 8, new double[n]) {}",
            "f(a, g(new double[n]));",
            "  std::make(new double[n]);",
            "  if (ok) cells(new double[n]);",
            "  if (new double[n])",
            "  return (new double[n]);",
        ] {
            let new_at = other.find("new").unwrap() as u32 + 1;
            assert_eq!(initialized_member(other, new_at, None), None, "{other}");
        }
        for other in [
            "double *y = malloc(8);",
            "a[i] = malloc(8);",
            "a[i].p = malloc(8);",
            "*p = malloc(8);",
            "p->q[1] = malloc(8);",
            "x -= 8 + g(malloc(8));",
            "p. = malloc(8);",
            "p->2 = malloc(8);",
            "if (p == malloc(8)) {}",
            "n += f(malloc(8));",
            "free(malloc(8));",
            "A::b = malloc(8);",
        ] {
            assert_eq!(target(other, 12), None, "{other}");
        }
    }

    #[test]
    fn a_declared_pointer_is_named_only_when_the_allocation_is_its_value() {
        let value = |line: &str, at: &str, name: &str, callee: &str| {
            let column = line.find(at).unwrap() as u32 + 1;
            declared_value(line, column, name, Some(callee))
        };
        assert!(value(
            "long *p = (long *)malloc(64);",
            "malloc",
            "p",
            "malloc"
        ));
        assert!(value("Node *n(new Node);", "new", "n", "new"));
        assert!(value("Node *n{new Node()};", ")", "n", "new"));
        assert!(value(
            "struct v *v = malloc(sizeof *v); v->d = calloc(1, 8);",
            "malloc",
            "v",
            "malloc"
        ));
        assert!(!value(
            "long *p = (long *)malloc(64) + 1;",
            "malloc",
            "p",
            "malloc"
        ));
        assert!(!value("W *w = wrap(calloc(8, 8));", "wrap", "w", "calloc"));
        assert!(!value(
            "W *w = new W(new long[8]());",
            "new long",
            "w",
            "new"
        ));
        assert!(!value(
            "W *w = new W(nullptr), *x = new W;",
            "new W;",
            "w",
            "new"
        ));
    }

    #[test]
    fn a_growing_method_names_its_container() {
        // The method's name as the allocation's library frames give it: the one at `at`.
        let grown = |line: &str, at: &str, method: &str| {
            let column = line.find(at).unwrap() as u32 + 1;
            grown_container(line, column, Some(method)).map(|a| a.path())
        };
        let named = |path: &str| Some(path.to_owned());
        assert_eq!(
            grown("    accs.resize(4);", "resize", "resize"),
            named("accs")
        );
        assert_eq!(grown("    accs.resize(4);", "(", "resize"), named("accs"));
        assert_eq!(
            grown("  st.hits.assign(8, 0);", "(", "assign"),
            named("st.hits")
        );
        assert_eq!(
            grown(
                "for (int i = 0; i < 8; i++) grown.push_back(0);",
                "push_back",
                "push_back"
            ),
            named("grown")
        );
        assert_eq!(
            grown("p->items . reserve (n);", "reserve", "reserve"),
            named("p->items")
        );
        for (line, at) in [
            ("accs.size();", "size"),
            ("a[i].resize(4);", "resize"),
            ("resize(4);", "resize"),
            ("f().resize(4);", "resize"),
            ("accs.resize(4);", "accs"),
            ("vp->resize(4);", "resize"),
        ] {
            assert_eq!(grown(line, at, at), None, "{line}");
        }
        // Another method (a braced temporary's constructor) allocated.
        assert_eq!(grown("rows.push_back({1, 2});", "(", "vector"), None);
    }

    #[test]
    fn a_statement_continued_on_the_next_line_is_read_as_one() {
        let (joined, column) = continued("  double *y =  ", "      malloc(n);", 7).unwrap();
        assert_eq!(joined, "  double *y =       malloc(n);");
        assert_eq!(&joined[column as usize - 1..], "malloc(n);");
        assert!(statement_declares(&joined, column, "y", false));
        let (joined, column) = continued("v->data =", "  (long *)calloc(4, 8);", 12).unwrap();
        assert_eq!(
            assigned_target(&joined, column, Some("calloc")).map(|a| a.path()),
            Some("v->data".to_owned())
        );
        for first in [
            "if (a ==",
            "x +=",
            "f(a,",
            "int y = 0;",
            "a <=",
            "std::vector<P> acc; // later: acc =",
            "long *q; /* q = */",
        ] {
            assert_eq!(continued(first, "malloc(8);", 1), None, "{first}");
        }
    }

    #[test]
    fn lines_end_as_the_compiler_counts_them_and_keep_their_byte_columns() {
        assert_eq!(split_lines(b"a\nb\r\nc\rd\n"), ["a", "b", "c", "d"]);
        assert_eq!(split_lines(b"a\n\nb"), ["a", "", "b"]);
        // Latin-1 `\xe9`: one byte, one column.
        let lines = split_lines(b"s = \"\xe9\"; p = malloc(8);\n");
        assert_eq!(lines[0].find("malloc"), Some(13));
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("renumbered.c");
        std::fs::write(&p, "int x;\n#line 40\nint y;\n").expect("write");
        let mut s = SourceLines::default();
        let p = p.to_str().expect("utf-8");
        assert_eq!(s.raw_line(p, 1), None);
        assert_eq!(s.line(p, 3), Some("int y;"));
    }

    #[test]
    fn lines_are_read_once_and_normalized() {
        let dir = tempfile::tempdir().expect("tmp");
        let p = dir.path().join("a.c");
        std::fs::write(&p, "int x;\n    a[i]  +=\t1;  \n").expect("write");
        let p = p.to_str().expect("utf-8");
        let mut s = SourceLines::default();
        assert_eq!(s.line(p, 2), Some("a[i] += 1;"));
        assert_eq!(s.line(p, 1), Some("int x;"));
        assert_eq!(s.line(p, 3), None);
        assert_eq!(s.line(p, 0), None);
        // Cached: a later change on disk is not seen within one run.
        std::fs::write(p, "changed\n").expect("rewrite");
        assert_eq!(s.line(p, 1), Some("int x;"));
        assert_eq!(s.line("/nonexistent/b.c", 1), None);
    }

    #[test]
    fn special_files_are_not_read() {
        let mut s = SourceLines::default();
        // Would read forever.
        assert_eq!(s.line("/dev/zero", 1), None);
        // Would wait for a writer forever.
        let dir = tempfile::tempdir().expect("tmp");
        let fifo = dir.path().join("src.c");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        assert_eq!(s.line(fifo.to_str().expect("utf-8"), 1), None);
        // A "regular" file of size 0 that reads without end.
        assert_eq!(s.line("/proc/self/pagemap", 1), None);
    }
}
