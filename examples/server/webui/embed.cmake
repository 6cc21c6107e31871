# Turns the chat page into a C++ header at build time (cmake -P, so no xxd is needed):
#   cmake -DIN=index.html -DOUT=webui_page.h -P embed.cmake
# The header defines pagoda::server::kWebuiPage, the file's bytes, for webui.cpp alone.
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR size "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# Sixteen bytes a line, rather than one line of the whole page.
string(REPEAT "0x[0-9a-f][0-9a-f]," 16 row)
string(REGEX REPLACE "(${row})" "\\1\n" bytes "${bytes}")
file(WRITE ${OUT} "// Generated from ${IN} by embed.cmake; do not edit.
#pragma once
namespace pagoda::server {
inline constexpr unsigned char kWebuiPage[${size}] = {
${bytes}
};
}  // namespace pagoda::server
")
