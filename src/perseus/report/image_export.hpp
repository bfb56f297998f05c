// Figures as files: the SVG as is, or rendered to PNG or PDF by librsvg on a cairo surface
// (for slides and papers; the HTML report keeps the SVG inline).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "perseus/model/errors.hpp"

namespace perseus::report {

enum class ImageFormat { kSvg, kPng, kPdf };

// "svg", "png", "pdf" (case-insensitive); InputError naming the three otherwise.
ImageFormat parse_image_format(std::string_view name);
std::string_view extension(ImageFormat format);  // "svg", "png", "pdf"

// The file's bytes for a standalone SVG document (with width and height): itself, a PNG at
// `scale` pixels per SVG pixel, or a one-page PDF of the SVG's size (1 px = 0.75 pt).
// Throws InputError when librsvg cannot read the SVG (naming why).
std::string render_image(const std::string& svg, ImageFormat format, double scale = 2.0);

}  // namespace perseus::report
