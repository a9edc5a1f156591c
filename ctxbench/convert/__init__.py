"""Document conversion: PDF → markdown for the scientific-article track (SciTrek, Li et al., section 3.1)."""

from ctxbench.convert.pdf import Conversion, ConversionError, convert_pdf, convert_pdfs

__all__ = ["Conversion", "ConversionError", "convert_pdf", "convert_pdfs"]
