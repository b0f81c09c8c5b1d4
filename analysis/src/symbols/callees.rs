//! Which allocator a heap block came from, read from the call instruction at its allocation
//! site: `new T` (one object), `new T[n]` (an array, maybe after the element count) or a C
//! allocator (`malloc`, `aligned_alloc`: raw bytes). The trace records only where a block was
//! allocated, and the three need different layouts: a block from `new Base` may be a larger
//! `Derived`, and only `new[]` stores a count in front of its elements.
//!
//! The call is decoded from the start of its function (its bounds from `.eh_frame`, as in
//! `frames.rs`), and its target followed to a name: a function of the module (a static
//! link), or through a PLT stub (`jmp *slot(%rip)`, after an `endbr64` in `.plt.sec`) or a
//! `call *slot(%rip)` (`-fno-plt`) to the dynamic relocation that fills the slot, whose
//! symbol is the function called.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind};
use object::{Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget};

/// The function that allocated a heap block, as far as its layout depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allocator {
    /// `operator new` (`_Znwm` and its `nothrow` and aligned forms): one object, possibly of
    /// a class derived from the pointer's type.
    New,
    /// `operator new[]` (`_Znam` …): an array, after the Itanium ABI's count cookie when the
    /// element type has a destructor.
    ArrayNew,
    /// A C allocator (`malloc`, `calloc`, `realloc`, `aligned_alloc`, `posix_memalign`,
    /// `memalign`, `valloc`): bytes whose layout the program chose, never a cookie.
    C,
}

impl Allocator {
    /// The allocator a function symbol (`_Znam`, `malloc@GLIBC_2.2.5`) is, if it is one.
    pub fn named(symbol: &str) -> Option<Self> {
        let name = symbol.split('@').next().unwrap_or(symbol);
        // x86-64's size_t is `m` (unsigned long) in the mangled names.
        if name.starts_with("_Znam") {
            return Some(Allocator::ArrayNew);
        }
        if name.starts_with("_Znwm") {
            return Some(Allocator::New);
        }
        const C: [&str; 9] = [
            "malloc",
            "calloc",
            "realloc",
            "reallocarray",
            "aligned_alloc",
            "posix_memalign",
            "memalign",
            "valloc",
            "pvalloc",
        ];
        C.contains(&name).then_some(Allocator::C)
    }

    /// How a call of the allocator `symbol` is written in source: `new` (for `new T`,
    /// `new T[n]` and `::operator new`), or a C allocator's name (`malloc`).
    pub fn spelled(symbol: &str) -> Option<&str> {
        let name = symbol.split('@').next().unwrap_or(symbol);
        match Self::named(name)? {
            Allocator::New | Allocator::ArrayNew => Some("new"),
            Allocator::C => Some(name),
        }
    }
}

/// The name of the function called by the call instruction that returns to `ret` (a
/// link-time address of `file`), given the code of its function from `start`: `None` when
/// the code there is not a call or its target has no name.
pub(crate) fn callee(file: &object::File<'_>, code: &[u8], start: u64, ret: u64) -> Option<String> {
    let call = last_instruction(code, start, ret)?;
    if call.flow_control() != FlowControl::Call && call.flow_control() != FlowControl::IndirectCall
    {
        return None;
    }
    match call.op0_kind() {
        OpKind::NearBranch64 => code_target(file, call.near_branch_target()),
        OpKind::Memory if call.is_ip_rel_memory_operand() => {
            slot_symbol(file, call.ip_rel_memory_address())
        }
        _ => None,
    }
}

/// The instruction of `code` (starting at `start`) that ends at `ret`, decoding from the start.
fn last_instruction(code: &[u8], start: u64, ret: u64) -> Option<Instruction> {
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut last = None;
    while decoder.can_decode() {
        let i = decoder.decode();
        if i.is_invalid() {
            return None;
        }
        last = Some(i);
    }
    last.filter(|i| i.next_ip() == ret)
}

/// The name of the function at `target`: a symbol starting there, or what the PLT stub there
/// jumps through.
fn code_target(file: &object::File<'_>, target: u64) -> Option<String> {
    let symbol = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.address() == target && s.is_definition() && s.size() > 0);
    if let Some(s) = symbol {
        return s.name().ok().map(str::to_owned);
    }
    let section = file.sections().find(|s| {
        s.name().is_ok_and(|n| n.starts_with(".plt"))
            && (s.address()..s.address().saturating_add(s.size())).contains(&target)
    })?;
    let data = section.data().ok()?;
    let from = usize::try_from(target - section.address()).ok()?;
    let stub = data.get(from..)?;
    let mut decoder = Decoder::with_ip(64, stub, target, DecoderOptions::NONE);
    // `endbr64` first in an IBT stub (`.plt.sec`), then `(bnd) jmp *slot(%rip)`.
    for _ in 0..2 {
        let i = decoder.decode();
        if i.is_invalid() {
            return None;
        }
        match i.mnemonic() {
            Mnemonic::Endbr64 => continue,
            Mnemonic::Jmp if i.op0_kind() == OpKind::Memory && i.is_ip_rel_memory_operand() => {
                return slot_symbol(file, i.ip_rel_memory_address());
            }
            _ => return None,
        }
    }
    None
}

/// The symbol whose address the dynamic linker writes into the pointer slot at `slot` (a
/// GOT entry).
fn slot_symbol(file: &object::File<'_>, slot: u64) -> Option<String> {
    let (_, relocation) = file.dynamic_relocations()?.find(|(at, _)| *at == slot)?;
    let RelocationTarget::Symbol(index) = relocation.target() else {
        return None;
    };
    let table = file.dynamic_symbol_table()?;
    let symbol = table.symbol_by_index(index).ok()?;
    symbol.name().ok().map(str::to_owned)
}

/// Whether a block a `std::vector` method allocated holds that vector's elements, from the
/// library functions the allocation ran through (demangled, innermost first, up to the
/// program's line): the allocator's value type (`std::__new_allocator<long>::allocate`)
/// against the element type of the vector whose method the program called (the outermost,
/// `std::vector<std::vector<long, …>, …>::vector(…)`; a template method's return type in
/// front of it, `std::vector<long>& std::vector<…>::emplace_back<int>(int&&)`, skipped). On a
/// line that declares `std::vector<std::vector<long>> rows(n, std::vector<long>(m))` the
/// rows, allocated by the inner vectors' copies, are `long`s, not rows; a
/// `std::vector<bool>` allocates words; and a vector method that allocated through no
/// allocator (a `std::string` element built in the shared C++ library) did not allocate its
/// own elements. `None` when no vector method is outermost (no container, or a call chain
/// cut short).
pub(crate) fn holds_vector_elements(functions: &[String]) -> Option<bool> {
    let vector = without_return_type(functions.last()?).strip_prefix("std::vector")?;
    let element = first_template_argument(vector)?;
    let allocated = functions
        .iter()
        .find_map(|f| allocator_value_type(without_return_type(f)));
    Some(allocated == Some(element))
}

/// The method of `std::vector` the program called, when the outermost of the allocation's
/// library functions (as for [`holds_vector_elements`]) is one: `emplace_back` of
/// `std::vector<long>& std::vector<…>::emplace_back<int>(int&&)`.
pub(crate) fn vector_method(functions: &[String]) -> Option<&str> {
    let name = without_return_type(functions.last()?);
    let name = name.strip_prefix("std::vector")?;
    let params = top_level(name, '(')?;
    let qualified = &name[..params];
    let method = top_level_last(qualified, "::").map(|i| &qualified[i + 2..])?;
    Some(method.split('<').next().unwrap_or(method))
}

/// `name` without the return type a template function's demangled name starts with.
fn without_return_type(name: &str) -> &str {
    let end = top_level(name, '(').unwrap_or(name.len());
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in name[..end].char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            ' ' if depth == 0 => start = i + 1,
            _ => {}
        }
    }
    &name[start..]
}

/// The first `c` of `text` outside `<…>` and `(…)`.
fn top_level(text: &str, c: char) -> Option<usize> {
    let mut depth = 0i32;
    for (i, x) in text.char_indices() {
        match x {
            _ if x == c && depth == 0 => return Some(i),
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The last `pattern` of `text` outside `<…>` and `(…)`.
fn top_level_last(text: &str, pattern: &str) -> Option<usize> {
    let mut depth = 0i32;
    let mut last = None;
    for (i, x) in text.char_indices() {
        match x {
            '<' | '(' => depth += 1,
            '>' | ')' => depth -= 1,
            _ if depth == 0 && text[i..].starts_with(pattern) => last = Some(i),
            _ => {}
        }
    }
    last
}

/// `long` of `std::__new_allocator<long>::allocate(unsigned long, void const*)` (also
/// `__gnu_cxx::new_allocator<T>` and `std::allocator<T>`).
fn allocator_value_type(function: &str) -> Option<&str> {
    let class = &function[..function.find("::allocate(")?];
    let open = template_start(class)?;
    class[..open]
        .ends_with("allocator")
        .then(|| first_template_argument(&class[open..]))
        .flatten()
}

/// Where the template argument list that ends `name` (`…<…>`) starts.
fn template_start(name: &str) -> Option<usize> {
    if !name.ends_with('>') {
        return None;
    }
    let mut depth = 0usize;
    for (i, c) in name.char_indices().rev() {
        match c {
            '>' => depth += 1,
            '<' => {
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

/// The first argument of the template argument list `text` starts with (`<long, A>` →
/// `long`).
fn first_template_argument(text: &str) -> Option<&str> {
    let inner = text.strip_prefix('<')?;
    let mut depth = 0usize;
    for (i, c) in inner.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' if depth > 0 => depth -= 1,
            ',' | '>' if depth == 0 => return Some(inner[..i].trim()),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocators_are_told_apart_by_their_symbols() {
        assert_eq!(Allocator::named("_Znam"), Some(Allocator::ArrayNew));
        assert_eq!(
            Allocator::named("_ZnamSt11align_val_t"),
            Some(Allocator::ArrayNew)
        );
        assert_eq!(Allocator::named("_Znwm@GLIBCXX_3.4"), Some(Allocator::New));
        assert_eq!(
            Allocator::named("_ZnwmRKSt9nothrow_t"),
            Some(Allocator::New)
        );
        assert_eq!(
            Allocator::named("aligned_alloc@GLIBC_2.16"),
            Some(Allocator::C)
        );
        assert_eq!(Allocator::named("malloc"), Some(Allocator::C));
        assert_eq!(Allocator::named("xmalloc"), None);
        assert_eq!(Allocator::named("strdup"), None);
    }

    #[test]
    fn only_a_call_ending_at_the_return_address_is_read() {
        // mov %rbp,%rcx; call *0x10(%rip): the slot is 0x1009 + 0x10.
        let code = [0x48, 0x89, 0xe9, 0xff, 0x15, 0x10, 0, 0, 0];
        let call = last_instruction(&code, 0x1000, 0x1009).unwrap();
        assert!(call.is_ip_rel_memory_operand());
        assert_eq!(call.ip_rel_memory_address(), 0x1019);
        // The code does not end at that address: nothing.
        assert!(last_instruction(&code, 0x1000, 0x1008).is_none());
    }
    #[test]
    fn a_vectors_own_elements_are_told_from_what_they_allocate() {
        let functions = |inner: &str, outer: &str| {
            vec![
                format!("std::__new_allocator<{inner}>::allocate(unsigned long, void const*)"),
                format!("std::allocator_traits<std::allocator<{inner}> >::allocate(std::allocator<{inner}>&, unsigned long)"),
                format!("std::vector<{outer}, std::allocator<{outer}> >::vector(unsigned long)"),
            ]
        };
        let row = "std::vector<long, std::allocator<long> >";
        // The outer vector's buffer holds rows; a row's buffer, allocated by the same line,
        // holds longs.
        assert_eq!(holds_vector_elements(&functions(row, row)), Some(true));
        assert_eq!(holds_vector_elements(&functions("long", row)), Some(false));
        assert_eq!(
            holds_vector_elements(&functions("unsigned long", "bool")),
            Some(false)
        );
        assert_eq!(holds_vector_elements(&functions("Acc", "Acc")), Some(true));
        // gcc's older allocator, and no vector method outermost.
        assert_eq!(
            holds_vector_elements(&[
                "__gnu_cxx::new_allocator<int>::allocate(unsigned long, void const*)".to_owned(),
                "std::vector<int, std::allocator<int> >::push_back(int const&)".to_owned()
            ]),
            Some(true)
        );
        assert_eq!(
            holds_vector_elements(&[
                "std::__new_allocator<int>::allocate(unsigned long, void const*)".to_owned()
            ]),
            None
        );
        assert_eq!(holds_vector_elements(&[]), None);
        // A template method's return type in front; a row's buffer emplaced into rows.
        let emplaced = [
            "std::__new_allocator<long>::allocate(unsigned long, void const*)".to_owned(),
            format!("{row}& std::vector<{row}, std::allocator<{row}> >::emplace_back<int>(int&&)"),
        ];
        assert_eq!(holds_vector_elements(&emplaced), Some(false));
        assert_eq!(vector_method(&emplaced), Some("emplace_back"));
        // No allocator: a `std::string` element built in the shared library.
        let strings = ["std::vector<std::string, std::allocator<std::string> >::emplace_back<int, char>(int&&, char&&)".to_owned()];
        assert_eq!(holds_vector_elements(&strings), Some(false));
        assert_eq!(
            vector_method(&functions(row, row)),
            Some("vector"),
            "a constructor"
        );
        assert_eq!(
            vector_method(&["std::deque<long>::resize(unsigned long)".to_owned()]),
            None
        );
    }
}
