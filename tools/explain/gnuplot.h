// Pictures through gnuplot (Debian's gnuplot-nox; tools/setup.sh installs it): a subcommand
// writes a gnuplot script whose data sit inline as a datablock ($data << EOD ... EOD, the same
// rows its --json prints), and gnuplot renders it to an SVG file. A missing gnuplot is an error
// that says how to install it.
#pragma once

#include <string>

namespace tessera {
namespace explain {

bool gnuplot_available();
// The script's first lines: SVG terminal of width x height, output to `path` (which must end in
// .svg), a title.
std::string gnuplot_preamble(const std::string& path, int width, int height, const std::string& title);
// Runs the script and says on stderr that it wrote `path`; throws naming the file when gnuplot
// is missing or fails.
void run_gnuplot(const std::string& script, const std::string& path);

// The --plot flag's value checked: ends in .svg, no quotes.
void check_plot_path(const std::string& path);

}  // namespace explain
}  // namespace tessera
