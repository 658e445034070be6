#!/usr/bin/env bash
# Every path the documentation and the code comments name must exist in the tree (ctest:
# docs.paths).
#
# Usage: tests/docs/check_paths.sh [REPO_ROOT]   (default: the repository holding this script)
#
# Reads README.md and every docs/**/*.md, outside fenced code blocks (``` ... ```), and checks:
#  (a) links: every markdown link target [text](target) that is not a web or mail address
#      (http:, https:, mailto:) and not only an #anchor must exist relative to the folder of the
#      file that holds it (the #anchor is stripped first);
#  (b) paths in backticks: every word of an inline code span that looks like a path in the
#      repository must exist relative to the repository root. A word looks like one when it starts
#      with src/ apps/ tests/ docs/ bench/ scripts/ configs/ fuzz/ .ci/, or is one of the top-level
#      files CMakeLists.txt, CMakePresets.json, README.md, .gitignore, .clang-format; a word that
#      starts with ../ is taken relative to the doc's own folder instead.
#      Trailing punctuation ( , ; : . ) ] ) and a trailing :LINE or :LINE-LINE are stripped.
#      A word with a glob (*, ?) passes when the glob matches at least one path, and a source
#      module named without its extension (src/aegis/supervisor) when PATH.* matches.
#
# Skipped, since they name no file of the tree:
#  - words with placeholders: <...>, NAME-style capitals after a slash (DIR/, OUT/, NNNNN), "..."
#    and brace lists {a,b};
#  - build outputs and files made at run time: build*/, runs/, data/, node_modules (ignored by git).
# Prints "FILE:LINE: missing PATH" for each path that does not exist and exits 1 if any.
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/../.." && pwd)"}
cd "$root"

docs=(README.md)
while IFS= read -r f; do docs+=("$f"); done < <(find docs -name '*.md' -type f | sort)

# One record per candidate: KIND<TAB>LINE<TAB>TARGET, KIND "link" or "code". Inline code spans may
# run over a line break; a span is reported at the line where it opens.
extract() {
  awk '
    BEGIN { in_fence = 0; in_span = 0 }
    /^[ \t]*```/ { in_fence = !in_fence; next }
    in_fence { next }
    {
      line = $0; plain = ""; i = 1; n = length(line)
      while (i <= n) {
        c = substr(line, i, 1)
        if (c == "`") {
          if (in_span) { print "code\t" span_line "\t" span; in_span = 0 }
          else { in_span = 1; span = ""; span_line = NR }
        } else if (in_span) {
          span = span c
        } else {
          plain = plain c
        }
        i++
      }
      if (in_span) span = span " "
      # Links in the text outside code spans: [text](target)
      while (match(plain, /\]\([^)]*\)/)) {
        target = substr(plain, RSTART + 2, RLENGTH - 3)
        sub(/[ \t].*$/, "", target)   # drop a link title: (path "title")
        print "link\t" NR "\t" target
        plain = substr(plain, RSTART + RLENGTH)
      }
    }
    # A paragraph break ends an unclosed span: a lone backtick is text, not code.
    /^[ \t]*$/ { in_span = 0 }
  ' "$1"
}

looks_like_repo_path() {
  case "$1" in
    src/* | apps/* | tests/* | docs/* | bench/* | scripts/* | configs/* | fuzz/* | .ci/*) return 0 ;;
    CMakeLists.txt | CMakePresets.json | README.md | .gitignore | .clang-format) return 0 ;;
  esac
  return 1
}

# A source file named from src/ without the src/ (`model/zaya_model.h`, `train/trainer.cpp`), as
# code comments and docs often write them: its first folder is one of src/'s.
src_folders=" $(cd src && ls -d -- */ | tr -d / | tr '\n' ' ')"
looks_like_source_path() {
  [[ "$1" =~ ^([a-z_]+)/[^[:space:]]*\.(h|cpp|cu|cuh|inc)$ && "$src_folders" == *" ${BASH_REMATCH[1]} "* ]]
}

is_placeholder() {
  case "$1" in
    *'<'* | *'>'* | *'...'* | *'{'* | *'}'* | *'$'*) return 0 ;;
    build* | */build/* | runs/* | data/* | */node_modules/*) return 0 ;;
  esac
  # An all-capitals path component such as DIR, OUT or NNNNNNNN stands for a name.
  [[ "/$1/" =~ /[A-Z_]{2,}[/.-] && ! "/$1/" =~ /(CMakeLists|CMakePresets|README|COMPLETE)[/.] ]]
}

# Strips from $word the trailing punctuation of the sentence around it, then a :LINE or
# :LINE-LINE (sets $word: no subshell per word).
trailing_punctuation='^(.*[^],;:.)])[],;:.)]+$'
line_number='^(.*):[0-9]+(-[0-9]+)?$'
strip_decoration() {
  if [[ "$word" =~ $trailing_punctuation ]]; then word=${BASH_REMATCH[1]}; fi
  if [[ "$word" =~ $line_number ]]; then word=${BASH_REMATCH[1]}; fi
}

exists_in_tree() {  # exists_in_tree PATH (globs allowed)
  local path=$1
  if [[ "$path" == *[*?]* ]]; then
    compgen -G "$path" > /dev/null
  else
    # A module named without its extension (src/aegis/supervisor: the .h and .cpp) counts too.
    [[ -e "$path" ]] || compgen -G "$path.*" > /dev/null
  fi
}

missing=0
checked=0
for doc in "${docs[@]}"; do
  folder=$(dirname "$doc")
  while IFS=$'\t' read -r kind line target; do
    if [[ "$kind" == link ]]; then
      case "$target" in http:* | https:* | mailto:* | '#'* | '') continue ;; esac
      path=${target%%#*}
      checked=$((checked + 1))
      if ! exists_in_tree "$folder/$path"; then
        echo "$doc:$line: missing link target $target"
        missing=$((missing + 1))
      fi
      continue
    fi
    read -ra words <<< "$target"   # split on blanks, no glob expansion
    for word in "${words[@]}"; do
      strip_decoration
      base=.
      if [[ "$word" == ../* ]]; then
        base=$folder   # a path written relative to the doc's own folder
      elif looks_like_source_path "$word"; then
        base=src
      else
        looks_like_repo_path "$word" || continue
      fi
      is_placeholder "$word" && continue
      checked=$((checked + 1))
      if ! exists_in_tree "$base/$word"; then
        echo "$doc:$line: missing path $word"
        missing=$((missing + 1))
      fi
    done
  done < <(extract "$doc")
done

# (c) Code comments: in every tracked source, script and CMake file, the words of a comment (after
# // in C++ and CUDA, after # in shell, Python and CMake) that look like paths in the repository
# or like src/ modules must exist (relative to the root, or to src/ for a module such as
# bench/gemm_bench.h). A possessive 's and a trailing :LINE or :A:B (a config's :batch:seq) are
# stripped; placeholders are skipped as above.
comment_words() {  # comment_words FILE MARKER: "LINE<TAB>WORD" for the path-looking words
  awk -v marker="$2" '
    { i = index($0, marker); if (i == 0) next
      n = split(substr($0, i + length(marker)), w, /[ \t`(]+/)
      for (k = 1; k <= n; ++k) if (w[k] ~ /\//) print NR "\t" w[k] }' "$1"
}
trail=",;:.)\"'\\]"
sources=0
while IFS= read -r f; do
  case "$f" in
    *.sh | *.py | *CMakeLists.txt | *.cmake) marker='#' ;;
    *) marker='//' ;;
  esac
  sources=$((sources + 1))
  while IFS=$'\t' read -r line word; do
    word=${word#[\"\']}
    while [[ -n "$word" && "$trail" == *"${word: -1}"* ]]; do word=${word%?}; done
    word=${word%\'s}
    [[ "$word" =~ ^([^:]*):[0-9] ]] && word=${BASH_REMATCH[1]}
    looks_like_repo_path "$word" || looks_like_source_path "$word" || continue
    is_placeholder "$word" && continue
    checked=$((checked + 1))
    if ! exists_in_tree "$word" && ! exists_in_tree "src/$word"; then
      echo "$f:$line: missing path $word (in a comment)"
      missing=$((missing + 1))
    fi
  done < <(comment_words "$f" "$marker")
done < <(git ls-files src apps tests bench scripts fuzz CMakeLists.txt 2> /dev/null |
  grep -E '(\.(h|cpp|cu|cuh|inc|sh|py|mjs|cmake)|CMakeLists\.txt)$' | grep -v node_modules)

if ((missing)); then
  echo "FAIL: $missing path(s) named in the docs or in code comments do not exist (of $checked checked in ${#docs[@]} docs and $sources sources)"
  exit 1
fi
echo "ok: all $checked paths named in ${#docs[@]} docs and the comments of $sources sources exist"
