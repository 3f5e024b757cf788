# Check that a section of README.md shows a file verbatim: the first ```c block after the heading
# SECTION (the whole heading line, e.g. "## The library in one example") must equal FILE, byte for
# byte. On a difference it names the first line that differs, so README and file can be mended.
#   cmake -DREADME=README.md "-DSECTION=## Heading" -DFILE=examples/x.c -P readme_block.cmake
cmake_minimum_required(VERSION 3.22) # new policies for if() and while(), as the project's
foreach(v README SECTION FILE)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "readme_block.cmake: -D${v}=... is required")
  endif()
endforeach()
file(READ "${README}" readme)
set(readme "\n${readme}") # so that a heading on the first line is found as "\n## ..." too
file(READ "${FILE}" want)

string(FIND "${readme}" "\n${SECTION}\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} has no heading \"${SECTION}\"")
endif()
string(SUBSTRING "${readme}" ${at} -1 rest)
string(FIND "${rest}" "\n```c\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${README}: no ```c block after \"${SECTION}\"")
endif()
math(EXPR open "${open} + 6")
string(SUBSTRING "${rest}" ${open} -1 rest)
string(FIND "${rest}" "\n```\n" close)
if(close EQUAL -1)
  message(FATAL_ERROR "${README}: the ```c block after \"${SECTION}\" is not closed")
endif()
math(EXPR close "${close} + 1")
string(SUBSTRING "${rest}" 0 ${close} block)

if(block STREQUAL want)
  message("${README}, \"${SECTION}\": its C block is ${FILE}, verbatim")
  return()
endif()
# Find the first line that differs. The texts are split by hand, not as CMake lists: C code holds
# semicolons and brackets.
set(line 1)
while(TRUE)
  string(FIND "${block}" "\n" nb)
  string(FIND "${want}" "\n" nw)
  if(nb EQUAL -1)
    set(lb "${block}")
  else()
    string(SUBSTRING "${block}" 0 ${nb} lb)
  endif()
  if(nw EQUAL -1)
    set(lw "${want}")
  else()
    string(SUBSTRING "${want}" 0 ${nw} lw)
  endif()
  if(NOT lb STREQUAL lw OR nb EQUAL -1 OR nw EQUAL -1)
    break()
  endif()
  math(EXPR nb "${nb} + 1")
  math(EXPR nw "${nw} + 1")
  string(SUBSTRING "${block}" ${nb} -1 block)
  string(SUBSTRING "${want}" ${nw} -1 want)
  math(EXPR line "${line} + 1")
endwhile()
message(FATAL_ERROR "${README}, \"${SECTION}\": its C block differs from ${FILE} at line ${line}:\n"
                    "  README: ${lb}\n  file:   ${lw}\n"
                    "Copy ${FILE} into the block (or the block into the file) so that they are the same.")
